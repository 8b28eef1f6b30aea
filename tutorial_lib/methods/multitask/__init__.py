"""Chapter *multitask*: notebooks 06 (multi-task and sequential fine-tuning) and 07 (GradTS).

Read first
    ``multitask.py``: ``Experiment`` (one backbone, one head per task, a ``TaskSampler`` choosing
    each step's task) and ``head_loss``; everything in 06 and 07 trains through it: its ``recipe``
    (a ``finetuning.Recipe`` whose loader is ``MultiTaskBatches``) run by ``finetuning.run``. Every
    run is a ``finetuning.Run`` (setting in ``name``, per-task ``scores`` and ``steps``, losses and
    learning curve in its ``history``); ``collect`` makes the table, one row per run and task
    (``task_rows``).

Modules
    ``settings.py`` — ``MultiTaskRuns`` (the shared budget), ``MultitaskSettings``, ``GradTSSettings``.
    ``multitask.py`` (06, 07) — the sampler, the experiment, learning curves, floors.
    ``gradts.py`` (07) — per-head gradient importance and the ranking of auxiliary tasks.
    ``gradts_fg.py`` (07) — GradTS-fg's instance-level selection and GradTS's four settings.
    ``plots.py`` — 06–07's figures.

The notebook calls
    06: ``multitask.Experiment`` (``equal_steps``: the "more updates" control), ``TaskSampler``,
        ``lm_aux_loss``, ``SINGLE``, ``EQUAL_STEPS`` (the two single-task rows), ``collect``,
        ``compare_each``, ``curves``, ``task_floor``; ``references.with_expected``,
        ``source_effect``; ``plots.plot_sampling``, ``plot_learning_curves``, ``plot_task_losses``
        (of a run's ``losses``), ``plot_task_scores``.
    07: ``gradts.rank_auxiliaries``, ``task_correlation``, ``normalize_importance``, ``_per_head``
        (shown); ``gradts_fg.task_importance``, ``gradts_settings``, ``RANDOM_SUBSET`` (the control),
        ``floor_checks``, ``compare_arms`` (each comparison resting on its arms being different
        runs: ``arms_premises``); ``multitask.Experiment``, ``head_loss``, ``SINGLE``, ``collect``;
        ``references.expected``, ``with_expected``; ``plots.plot_head_importance``,
        ``plot_task_correlation``, ``plot_instance_tau``, ``plot_task_scores``.
"""
