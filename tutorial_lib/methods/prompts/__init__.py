"""Chapter *prompts*: notebook 09, prompt-based few-shot classification and DART.

Read first
    ``prompting.py``: a masked LM's head read at a ``[MASK]`` in a template, the verbalizer's words
    as the classes (LM-BFF); then ``dart.py``, which makes the template and the label words
    trainable embeddings.

Modules
    ``settings.py`` — ``DARTSettings``.
    ``prompt_lms.py`` — the LMs a prompt runs on (ours, SmolLM2, a Hub MLM) and which layers train.
    ``prompting.py`` — templates, verbalizers, ``PromptClassifier``.
    ``dart.py`` — DART's ``ExtendedEmbedding``, ``DARTClassifier``, its fluency term (masked LMs;
    on a causal LM with the label vector before the text) and the check that its vectors moved.
    ``fewshot.py`` — the few-shot loop (train, choose on the few-shot dev set, test once: a
    ``recipe`` run by ``finetuning.run``; each run a ``finetuning.Run`` with its ``lr``,
    ``best_step`` and dev evaluations: ``chosen``), each
    method's rate chosen once on a few splits' dev sets, and the comparison of every method on the
    same splits.
    ``probe.py`` — the logistic-regression probe on frozen features, and the same probe as head
    fine-tuning's starting head (LP-FT, Kumar et al. 2022).
    ``papers.py`` — the papers' K = 16 numbers.
    ``plots.py`` — 09's figure.

The notebook calls
    ``prompting.load_prompt_lm``, ``template_for``, ``verbalizer_candidates``, ``choose_verbalizer``,
    ``verbalizer_ids``, ``prompt_collate``, ``PromptClassifier``; ``dart.ExtendedEmbedding``,
    ``DARTClassifier``, ``dart_method``, ``fluency_bce``, ``start_cosines``, ``MOVED_COS``,
    ``moved_premise``, ``paper_table``; ``fewshot.choose_rates``, ``compare_fewshot``,
    ``prompt_method``, ``cls_method``, ``head_start``, ``fresh``, ``zero_shot``, ``logreg_probe``,
    ``LOGREG``, ``majority_floors``, ``summarize``, ``verdicts``, ``verdict_lines``;
    ``prompt_lms.FrozenPrefix``, ``FrozenStates``; ``papers.PAPER_K16``; ``plots.plot_methods_by_task``.
"""
