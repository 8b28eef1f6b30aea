"""Chapter *probing*: notebooks 10 (probing) and 11 (amnesic probing, adversarial heads).

Read first
    ``probing.py``: sentences → word-level features of every layer → a linear probe per layer,
    with its control task (selectivity); 11 reuses it, then erases what the probe read.

Modules
    ``settings.py`` — ``ProbingSettings``, ``AmnesicSettings``.
    ``probing.py`` (10, 11) — UD sentences, sub-word alignment, features, probes, attention maps.
    ``inlp.py`` (11) — iterative nullspace projection and LEACE (``leace``), the erasers; the
    probe's C chosen on dev; count- and variance-matched random controls.
    ``amnesic.py`` (11) — the LM with a property erased, its controls, and adversarial fine-tuning.
    ``adversarial.py`` (11) — the five-arm experiment: an intermediate POS stage (none, λ = 0,
    reversed, inverted labels, random labels), then probe, movement (linear CKA) and the
    trainability of a syntactic and a less syntactic target.
    ``plots.py`` — 10–11's figures.

The notebook calls
    10: ``probing.load_sentences``, ``extract_features``, ``probe_layers``, ``attention_maps``,
        ``pca_2d``; ``plots.plot_probe_layers``, ``plot_selectivity``, ``plot_projection_2d``,
        ``plot_attention``.
    11: ``inlp.inlp``, ``random_projection``; ``amnesic.lm_metrics``, ``projection_table``,
        ``adversarial_finetune``, ``final_probe_accuracy``; ``plots.plot_inlp_curves``,
        ``plot_amnesic_bars``, ``plot_tradeoff``.
"""
