"""Chapter *adaptation*: notebooks 02–05, fine-tuning a pretrained model and its optimisation schemes.

Notebook 02 fine-tunes with the core alone (:mod:`tutorial_lib.finetuning`, the one
recipe :func:`tutorial_lib.training.fit`); 03–05 change one thing in that recipe each.

Read first
    ``settings.py`` (``AdaptationSettings`` … ``DiscriminativeSettings``: what each notebook runs
    at every scale), then the module of the notebook you open.

Modules
    ``feature_extraction.py`` (03) — a frozen backbone, cached hidden states, ELMo's ``ScalarMix``.
    ``unfreezing.py`` (04) — gradual unfreezing and chain-thaw as a ``training.Method``.
    ``discriminative.py`` (05) — per-layer rates (ξ^depth) and slanted triangular schedules.
    ``readings.py`` (03) — "What this run shows", computed from the run's tables.
    ``plots.py`` — 03–05's figures.
    03's adapters live in :mod:`tutorial_lib.methods.peft.adapters` (13 builds on them).

The notebook calls
    02: nothing of the chapter's but its settings (the core alone).
    03: ``feature_extraction.feature_extraction_runs``, ``feature_layer_names``, ``ScalarMix``,
        ``mix_weights``; ``peft.adapters.Adapter``, ``prepare_adapters``, ``add_adapters``,
        ``freeze_for_adapters``; ``readings.what_to_train`` (it prints the reading);
        ``plots.plot_cost_vs_error``, ``plot_mix_weights``.
    04: ``unfreezing.Unfreezing``, ``UnfreezingHandler``, ``MODES``, ``gradual_stages``,
        ``chain_thaw_stages``; ``plots.plot_timelines``.
    05: ``discriminative.discriminative_groups``, ``layer_param_groups``, ``group_names``, ``stlr``,
        ``stlr_as_printed`` (the paper's Eq. 3 as printed), ``stlr_schedule``, ``warmup_linear``,
        ``compounding_lrs``; ``plots.plot_schedules``, ``plot_group_lrs``.
"""
