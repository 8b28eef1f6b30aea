"""Chapter *token_tasks*: notebook 15, transfer to token-level tasks (named entities, extractive QA).

Read first
    ``token_tasks.py``: word tags carried onto sub-word pieces (``tokenize_and_align``) and back,
    the token classifier and entity-level scoring; ``extractive_qa.py`` reuses its fitting.

Modules
    ``settings.py`` — ``TokenTaskSettings``.
    ``token_tasks.py`` — IOB tags, ``TokenClassifier``, ``entity_scores`` (seqeval), baselines.
    ``extractive_qa.py`` — windows, answer spans as token positions, the span search, EM/F1.
    ``plots.py`` — 15's figure.

The notebook calls
    ``token_tasks.tokenize_and_align``, ``align_labels``, ``IGNORE``, ``check_tags``,
    ``TokenClassifier``, ``finetune_ner`` (with ``dev``: the dev curve in the run's history),
    ``entity_scores``, ``MajorityTagger``, ``all_o_tagger``; ``extractive_qa.windows``,
    ``char_to_token_span``, ``span_text``, ``check_spans``, ``SpanExtractor``, ``best_span`` (also
    the self-check's reference), ``finetune_qa``, ``squad_scores``, ``normalize_answer``,
    ``exact_match``, ``token_f1``, ``f1``, the baselines ``first_sentence_baseline`` and
    ``overlap_sentence_baseline``, ``chance_scores`` (chance at one seed: the QA headline's
    baseline); ``plots.plot_token_tasks``, ``plot_dev_curves``.
"""
