"""Chapter *tdt*: notebook 08, regularised fine-tuning and task-guided disentangled tuning (TDT).

Read first
    ``regularized.py``: what every regulariser shares (a ``training.Method`` whose loss sees two
    views of a batch, the equal step budget) and R-Drop, R3F and token cutoff; then ``tdt.py``.

Modules
    ``settings.py`` — ``TDTSettings``.
    ``regularized.py`` — R-Drop, R3F, cutoff; the out-of-domain transfer sets and columns.
    ``tdt.py`` — TDT's token confidences, its two views and the KL hinge (``tdt_loss``).
    ``plots.py`` — 08's figures.

The notebook calls
    ``tdt.TDTConfig``, ``attach``, ``token_confidences``, ``make_views``, ``views_for_batch``,
    ``tdt_loss``, ``method``, ``confidence_table``, ``label_association``; ``regularized.rdrop``,
    ``r3f``, ``cutoff``, ``PASSES_PER_STEP`` (each method's cost at equal steps), ``transfer_sets``,
    ``with_transfer``, ``transfer_columns``; ``references.source_effect``; ``plots.plot_tdt_terms``,
    ``plot_token_confidences``, ``plot_method_errors``.
"""
