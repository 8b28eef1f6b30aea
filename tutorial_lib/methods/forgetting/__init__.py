"""Chapter *forgetting*: notebook 13, forgetting in sequential transfer, its regularisers, and
ensembles distilled into small students.

Read first
    ``forgetting.py``: ``SequentialTransfer`` (stage 1 on the source task, stage 2 on the target
    with the source scored by its own frozen head and by a refitted linear head; stage 2 is a
    ``finetuning.Recipe`` per seed and regulariser, run by ``finetuning.compare``: one
    ``finetuning.Run`` each) and the penalties Ω added to stage 2's loss.

Modules
    ``settings.py`` — ``ForgettingSettings``.
    ``forgetting.py`` — weight decay, L2-SP, EWC (``diagonal_fisher``) and an LwF-style term.
    ``distillation.py`` — ensembles, the KD loss (Hinton et al.), students cut from the backbone and
    trained by ``finetuning.run`` (``train_student``: a ``finetuning.Run``).
    ``plots.py`` — 13's figures.

The notebook calls
    ``forgetting.SequentialTransfer`` (``of``, ``source_stage``, ``runs``, ``table``),
    ``regularisers``, ``anchored_penalty``, ``diagonal_fisher``, ``stage_two_loss``, ``curves``,
    ``curve``; ``distillation.kd_loss``, ``ensemble_probabilities``, ``row_probabilities``,
    ``row_labels``, ``accuracy``, ``teacher_rows``, ``truncated_backbone``, ``train_student``,
    ``transfer_text``, ``distillation``, ``items_comparison``, ``student_name``, ``size_row``;
    ``references.table``; ``plots.plot_stage_two_curves``, ``plot_tradeoff``, ``plot_students``.
"""
