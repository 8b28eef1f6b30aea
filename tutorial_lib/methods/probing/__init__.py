"""Chapter *probing*: notebooks 10 (probing), 11 (amnesic probing) and 12 (adversarial heads).

Read first
    ``probing.py``: sentences → word-level features of every layer → a linear probe per layer,
    with its control task (selectivity); 11 and 12 reuse it, then erase what the probe read.

Modules
    ``settings.py`` — ``ProbingSettings`` (10), ``AmnesicSettings`` (11), ``AdversarialSettings`` (12).
    ``probing.py`` (10–12) — UD sentences, sub-word alignment, features, probes, attention maps.
    ``inlp.py`` (11) — the erasers: iterative nullspace projection and LEACE (``leace``) as one
    ``Eraser`` type; the probe's C chosen on dev (``choose_C``); the fresh probe after an eraser
    (``probe_after``); count- and variance-matched random controls; re-injection.
    ``amnesic.py`` (11) — where the LM head reads (``lm_positions``), the LM under an edit
    (``lm_metrics``, ``projection_table``), both erasers per seed with their premise
    (``fit_erasers``, ``premise``), re-injection against a shuffled label.
    ``adversarial.py`` (12) — the intermediate stage's arms (none, λ = 0, reversed, inverted
    labels, random labels; any ``Arm`` with an ``Adversary``), movement (linear CKA), and a
    syntactic target (``train_deprel``).
    ``adversaries.py`` (12) — the stage's adversary: ``adversaries.Adversary`` (the reversed
    gradient, or the confusion objective; an MLP head; a head re-initialised every k steps), the
    stage's loss and handlers, the heads' helpers (``train_head_alone``, ``head_accuracy``).
    ``burnout.py`` (12) — what the verdicts rest on: fresh linear and MLP probes out of sample
    (``fresh_probes``, the erasure premise), the movement-matched control (``matched_control``,
    ``CONTROL``), one stage run per seed (``stage_runs``).
    ``plots.py`` — 10–12's figures.

The notebook calls
    10: ``probing.load_sentences``, ``Sentences``, ``PROPERTIES``, ``DEPREL_NAMES``, ``upos_names``,
        ``encode_words``, ``encode_sentences``, ``WordFeatures``, ``extract_features``,
        ``probe_layers``, ``spread_layers``, ``correct_by_word``, ``majority_correct_by_word``,
        ``attention_maps``, ``pca_2d``; ``plots.plot_probe_layers``, ``plot_selectivity``,
        ``plot_projection_2d``, ``plot_attention``.
    11: ``probing.load_sentences``; ``amnesic.subsample``, ``lm_positions``, ``lm_metrics``,
        ``fit_erasers``, ``premise``, ``projection_table``, ``reinjection_metrics``;
        ``inlp.choose_C``, ``inlp``, ``leace``, ``majority_rate``, ``projection_removing``,
        ``removed_means``, ``variance_removed``, ``random_projection``,
        ``variance_matched_projection``; ``plots.plot_inlp_curves``, ``plot_amnesic_bars``.
    12: ``probing.load_sentences``; ``adversarial.ARMS``, ``Arm``, ``intermediate_stage``,
        ``linear_cka``, ``train_deprel``, ``final_probe_accuracy``; ``adversaries.Adversary``;
        ``burnout.fresh_probes``, ``word_states``, ``matched_control``; ``plots.plot_arms``,
        ``plot_arm_curves`` (and from the core, TREC-6's ``finetuning.finetune``).
"""
