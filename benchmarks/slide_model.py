"""The NAACL-2019 tutorial's pretraining model, re-written from its description for benchmarking.

This is the *baseline* of ``benchmarks/throughput.py``: the model the 2019 slides and their
companion code (``pretraining_model.py``) trained, reproduced structure for structure so that its
cost is the 2019 cost. Nothing that changes the amount or the kind of work is "fixed" here:

* inputs and hidden states are **[seq, batch]** (``nn.MultiheadAttention`` with its default
  ``batch_first=False``); the training step transposes the batch-first data first, as the 2019
  update function did;
* token embeddings plus **learned** position embeddings, one dropout, no embedding LayerNorm;
* per layer ``nn.MultiheadAttention`` (attention dropout = dropout, ``need_weights=False``) and a
  feed-forward ``Linear → ReLU → Linear``, two LayerNorms with ``eps=1e-12``;
* the slides' LayerNorm wiring, which **re-normalises the residual stream itself** before each
  sublayer and has no final LayerNorm::

      h = LN1(h); h = h + Dropout(Attn(h))
      h = LN2(h); h = h + Dropout(FF(h))

  (neither GPT-2's pre-LN ``x + f(LN(x))`` nor the original post-LN);
* the causal mask is a float ``[T, T]`` matrix of ``-inf`` above the diagonal, **built anew in
  every forward** from ``torch.full`` + ``torch.triu``;
* a bias-free LM head **tied** to the token embeddings, applied to *all* T positions; the causal
  loss then drops the last position (``logits[:-1]`` vs ``labels[1:]``), ``ignore_index=-1``;
* init N(0, 0.02) for every Linear, Embedding *and LayerNorm weight* (the 2019 ``init_weights``
  also drew the LayerNorm gains from N(0, 0.02)), zero biases; the attention projections keep
  PyTorch's own (Xavier) init, which the 2019 code noted it relied on.

Sizes come from our :class:`tutorial_lib.models.TransformerConfig` (``vocab_size``, ``d_model``,
``n_layer``, ``n_head``, ``d_ff``, ``max_len``, ``dropout``, ``causal``) so that both models are
built from one config; the 2019 names are given in the comments.
"""

from __future__ import annotations

import torch
from torch import nn

from tutorial_lib.models import TransformerConfig

SLIDE_IGNORE_INDEX = -1  # the 2019 code's ``CrossEntropyLoss(ignore_index=-1)``
SLIDE_LN_EPS = 1e-12  # the 2019 code's LayerNorm epsilon


class SlideTransformer(nn.Module):
    """The 2019 ``Transformer``: ids ``[T, B]`` → hidden states ``[T, B, D]``."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.causal = cfg.causal
        # embed_dim = d_model, num_embeddings = vocab_size, num_max_positions = max_len
        self.tokens_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.position_embeddings = nn.Embedding(cfg.max_len, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        # four parallel ModuleLists, one entry per layer, as on the slide
        self.attentions = nn.ModuleList()
        self.feed_forwards = nn.ModuleList()
        self.layer_norms_1 = nn.ModuleList()
        self.layer_norms_2 = nn.ModuleList()
        for _ in range(cfg.n_layer):
            # batch_first defaults to False: the module expects [seq, batch, dim]
            self.attentions.append(nn.MultiheadAttention(cfg.d_model, cfg.n_head, dropout=cfg.dropout))
            # hidden_dim = d_ff; ReLU, not GELU
            self.feed_forwards.append(nn.Sequential(
                nn.Linear(cfg.d_model, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, cfg.d_model)))
            self.layer_norms_1.append(nn.LayerNorm(cfg.d_model, eps=SLIDE_LN_EPS))
            self.layer_norms_2.append(nn.LayerNorm(cfg.d_model, eps=SLIDE_LN_EPS))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: token ids ``[T, B]``; ``padding_mask``: ``[B, T]``, True at padding (optional)."""
        seq_len = x.size(0)
        # positions [T, 1] → embeddings [T, 1, D], broadcast over the batch
        positions = torch.arange(seq_len, device=x.device).unsqueeze(-1)
        h = self.tokens_embeddings(x)
        h = h + self.position_embeddings(positions).expand_as(h)
        h = self.dropout(h)

        # the causal mask is rebuilt on every call: a float [T, T] matrix, -inf above the diagonal
        attn_mask = None
        if self.causal:
            attn_mask = torch.full((seq_len, seq_len), float("-inf"), device=h.device, dtype=h.dtype)
            attn_mask = torch.triu(attn_mask, diagonal=1)

        for ln_1, attention, ln_2, feed_forward in zip(
            self.layer_norms_1, self.attentions, self.layer_norms_2, self.feed_forwards
        ):
            # the slide's wiring: the stream itself is normalised, then the sublayer is added to it
            h = ln_1(h)
            a, _ = attention(h, h, h, attn_mask=attn_mask, need_weights=False,
                             key_padding_mask=padding_mask)
            h = self.dropout(a) + h

            h = ln_2(h)
            f = feed_forward(h)
            h = self.dropout(f) + h
        return h  # no final LayerNorm


class SlideTransformerWithLMHead(nn.Module):
    """The 2019 ``TransformerWithLMHead``: the Transformer plus a tied, bias-free LM head.

    ``forward(x, labels)`` returns ``(logits [T, B, V], loss)``; with ``labels=None`` only the
    logits. Causal: position t predicts ``labels[t + 1]``; masked LM: no shift.
    """

    def __init__(self, cfg: TransformerConfig, initializer_range: float = 0.02):
        super().__init__()
        self.config = cfg
        self.initializer_range = initializer_range
        self.transformer = SlideTransformer(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        self.tie_weights()

    def tie_weights(self) -> None:
        self.lm_head.weight = self.transformer.tokens_embeddings.weight

    def _init_weights(self, module: nn.Module) -> None:
        # N(0, 0.02) for Linear, Embedding and LayerNorm weights (sic), zero biases.
        # nn.MultiheadAttention's in-projection is a bare Parameter and keeps PyTorch's init;
        # its out_proj is an nn.Linear subclass and is re-drawn here, as in 2019.
        if isinstance(module, (nn.Linear, nn.Embedding, nn.LayerNorm)):
            nn.init.normal_(module.weight, mean=0.0, std=self.initializer_range)
        if isinstance(module, (nn.Linear, nn.LayerNorm)) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        x: torch.Tensor,
        labels: torch.Tensor | None = None,
        padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        hidden = self.transformer(x, padding_mask)
        logits = self.lm_head(hidden)  # the head runs on every position, the last one included
        if labels is None:
            return logits
        causal = self.transformer.causal
        shift_logits = logits[:-1] if causal else logits
        shift_labels = labels[1:] if causal else labels
        loss = nn.functional.cross_entropy(
            shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1),
            ignore_index=SLIDE_IGNORE_INDEX,
        )
        return logits, loss
