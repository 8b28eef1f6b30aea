"""Chapter *generation*: notebook 16, decoding and a persona chatbot (TransferTransfo).

Read first
    ``decoding.py``: greedy, beam, top-k and nucleus sampling as *pickers* over the next-token
    distribution, one loop for ours and Hugging Face's LMs, and the diversity metrics.

Modules
    ``settings.py`` — ``DialogueSettings``.
    ``decoding.py`` — the decoding strategies and ``distinct_n``.
    ``dialogue.py`` — TransferTransfo's input (persona, history, reply; speaker tokens) and the
    double-heads model and loss.
    ``dialogue_training.py`` — fine-tuning with the lower layers' states cached, Hits@1 and
    perplexity.
    ``plots.py`` — 16's figures.

The notebook calls
    ``decoding.decode``, ``top_p_filter``, ``sample``, ``hf_generate``, ``distinct_n``;
    ``dialogue.build_input``, ``DoubleHeads``, ``double_heads_loss``, ``respond``;
    ``dialogue_training.cache``, ``finetune``, ``evaluate``, ``without_persona``;
    ``plots.plot_decoding``, ``plot_dialogue``.
"""
