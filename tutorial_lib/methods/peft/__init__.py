"""Chapter *peft*: notebook 14, parameter-efficient fine-tuning (and 03's adapters).

Read first
    ``peft_methods.py``: what each method adds or trains (``Full``, ``Houlsby``, ``LoRA``, ``IA3``,
    ``PromptTuning``, ``PrefixTuning``, ``BitFit``), on ``peft`` where it has the method.

Modules
    ``settings.py`` — ``PEFTSettings``.
    ``adapters.py`` (03, 14) — Houlsby adapters on our blocks and BERT's.
    ``lora.py`` — our own LoRA in a few lines, checked against ``peft``'s; the unified view.
    ``peft_methods.py`` — the methods, their parameter groups and counts.
    ``peft_checks.py`` — merge and reload checks, checkpoint sizes, step costs.
    ``peft_frontier.py`` — the frontier runs (each method at its own rate, checked against its
    grid's edges; the dev curves) and QLoRA's status.
    ``plots.py`` — 14's figures.

The notebook calls
    ``peft_methods.Full``, ``Houlsby``, ``LoRA``, ``IA3``, ``PromptTuning``, ``PrefixTuning``,
    ``BitFit``; ``lora.LoRALinear``, ``modified_output``, ``copy_lora_from_peft``, ``UNIFIED_VIEW``;
    ``peft_checks.logits``, ``MERGE_ATOL``, ``RELOAD_ATOL``; ``peft_frontier.frontier_runs``,
    ``rate_positions``, ``dev_curves``, ``start_errors``, ``check_and_cost``, ``as_method``,
    ``check_batch``, ``trained_counts``, ``qlora_run``, ``qlora_status``; ``adapters.Adapter``;
    ``references.table``; ``plots.plot_frontier``, ``plot_dev_curves``, ``plot_costs``.
"""
