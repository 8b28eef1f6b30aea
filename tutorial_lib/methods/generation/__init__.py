"""Chapter *generation*: notebook 16, decoding and a persona chatbot (TransferTransfo).

Read first
    ``decoding.py``: greedy, beam, top-k and nucleus sampling as *pickers* over the next-token
    distribution, one loop for ours and Hugging Face's LMs, and the diversity metrics.

Modules
    ``settings.py`` — ``DialogueSettings``.
    ``decoding.py`` — the decoding strategies and ``distinct_n``.
    ``dialogue.py`` — TransferTransfo's input (persona, history, reply; speaker tokens) and the
    double-heads model and loss.
    ``dialogue_training.py`` — fine-tuning with the lower layers' states cached and each context
    run once for its candidates, Hits@1 (by the head and by the LM) and perplexity, one seed's
    fine-tuning and evaluation as a recipe run by ``finetuning.run``.
    ``plots.py`` — 16's figures.

The notebook calls
    ``decoding.decode``, ``STRATEGIES``, ``top_k_filter``, ``top_p_filter``, ``sample``,
    ``hf_generate``, ``distinct_n``, ``text_prompts``, ``text_rows``, ``mean_interval``,
    ``HOLTZMAN_TABLE_1``; ``dialogue.PERSONA``, ``PARTNER``, ``BOT``, ``IGNORE``, ``turns``,
    ``build_input``, ``DoubleHeads``, ``double_heads_loss``, ``respond``; ``dialogue_training.cache``,
    ``sample``, ``score``, ``draw_all``, ``picked``, ``metrics``, ``finetune``, ``without_persona``,
    ``PAPER`` (and in the exercises ``evaluate``, ``train_top``); ``plots.plot_decoding``,
    ``plot_training``, ``plot_dialogue``.
"""
