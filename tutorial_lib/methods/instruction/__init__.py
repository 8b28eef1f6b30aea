"""Chapter *instruction*: notebook 17, instruction tuning (SFT) and preference optimisation (DPO).

Read first
    ``instructions.py``: the labelled tasks written as instructions (FLAN/T0 style, several
    templates each), rendered with the model's chat template, the loss mask on the response only.

Modules
    ``settings.py`` — ``InstructSettings``.
    ``instructions.py`` — templates, the instruction mixture, ``render`` (prompt + response, the
    labels -100 on the prompt) and the held-out tasks' answer options.
    ``zeroshot.py`` — ranking each answer option by its log-probability given the prompt;
    accuracy against each task's majority floor.
    ``sft.py`` — LoRA (``peft``) on the causal LM and supervised fine-tuning, a recipe run by the
    one runner (``finetuning.run``).
    ``dpo.py`` — the DPO loss beside its equation, the implicit reward, the frozen reference (the
    same model with its adapter disabled), DPO as a recipe run by the one runner.
    ``preferences.py`` — ConvAI2 turns as prompts, preference pairs (gold = chosen, a distractor
    = rejected), Hits@1 by a model's own score and the gold reply's perplexity.
    ``plots.py`` — 17's figures.

The notebook calls
    ``instructions.TEMPLATES``, ``mixture``, ``render``, ``render_all``, ``chat_text``,
    ``show_mask``, ``question_pool``; ``zeroshot.sequence_logps``, ``evaluate``; ``sft.run``,
    ``example_losses``, ``with_lora``, ``finetune``; ``dpo.dpo_loss``, ``batch_loss``,
    ``with_reference_logps``, ``finetune``; ``preferences.turns``, ``seed_turns``, ``sample``,
    ``pairs``, ``gold_rows``, ``messages``, ``score``, ``hits_at_1``, ``reply``;
    ``plots.plot_instruction``, ``plot_preferences`` (and from the core, the comparisons'
    premises: ``premises.above_floor_items``, ``loss_fell``, ``varied_answers``).
"""
