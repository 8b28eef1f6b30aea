"""Notebook 01's settings: our model's size (as the model's own config) and its pretraining recipe.

Every notebook that uses our pretrained models reads them through these settings at its scale
(``PretrainingSettings.at(scale)``): notebook 01 trains them, the others load what 01 left in the
cache (``pretraining.ensure``). The cache entries are named by :meth:`PretrainingSettings.fingerprint`,
so a changed recipe never loads a stale checkpoint.

Where the sizes come from:

- classroom: a few minutes of pretraining per objective on a 2-core laptop, WikiText-2 (01's
  committed run: 245 s for the causal LM and 144 s for the masked LM, fp32 on an Intel Xeon).
- gpu: measured on one H200 (``results/gpu``, 2026-11-27) with 6000 steps for both objectives: the
  causal LM's validation loss was lowest at step 1000-2000 (4.38 nats) and then rose to 5.82 at 6000
  (about 40 passes over WikiText-2's 2.4M tokens: it memorised the corpus), while the masked LM,
  which learns from 15 % of the tokens, kept improving to 6000 (3.27). Hence 1500 causal steps and
  6000 masked ones: about 4 min of 01 on an H200 instead of 6.
- paper: the 2019 tutorial's hyperparameters (Transformer-XL's WikiText-103 base: d=410, ff=2100,
  16 layers, 10 heads, 256 positions, ≈ 50M parameters); a GPU cluster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

from .models import TransformerConfig
from .settings import Overrides, Settings

# the fields of TransformerConfig that are sizes (causal and pad_id come from the objective and
# the tokenizer): the ones the fingerprint reads
SIZE_FIELDS = ("vocab_size", "d_model", "n_layer", "n_head", "d_ff", "max_len", "dropout")
# settings that change no checkpoint (evaluation only), or only the MLM's (mlm_steps)
_NOT_IN_FINGERPRINT = ("model", "compare_lines", "mlm_steps")


@dataclass(frozen=True)
class PretrainingSettings(Settings):
    """Our model's size and its language-model pretraining recipe (classroom values)."""

    notebook: ClassVar[str] = "01_pretraining"

    # the model: its vocab_size is the tokenizer's target size (the built model takes the
    # tokenizer's length); causal and pad_id are set per objective by pretraining.model_config
    model: TransformerConfig = TransformerConfig(
        vocab_size=8000, d_model=256, n_layer=4, n_head=4, d_ff=1024, max_len=128)
    corpus: str = "wikitext-2"  # a tutorial_lib.data registry name
    max_train_lines: int | None = None  # None = the whole corpus
    max_valid_lines: int | None = None
    seq_len: int = 64
    batch_size: int = 32
    steps: int = 400  # optimiser steps of the causal LM (and of the MLM unless mlm_steps is set)
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.01
    grad_accum: int = 1
    max_norm: float = 1.0
    eval_every: int = 200  # steps between evaluations / checkpoints
    mlm_probability: float = 0.15
    # The MLM learns from the 15 % masked tokens only, so it needs more steps than the causal LM;
    # its step is cheaper (the output layer runs on the targets only). None = ``steps``. 800
    # until 2026-11-28: 01 took 607 s on the 2-core EPYC (244 s for 800 MLM steps, 108 s for
    # SmolLM2 on 200 lines), and the 2-core Xeon runs fp32 about 1.35 times slower than the EPYC
    # ran bf16: 400 steps (6.62 nats at step 400 in that run, the unigram floor 6.80) and 100
    # lines keep it under 10 minutes. Only 02's and 09's exercises and 10's probes use the
    # masked LM; the causal LM, every notebook's "ours", is unchanged
    mlm_steps: int | None = 400
    compare_lines: int = 100  # validation lines a large pretrained LM (SmolLM2) is scored on in 01

    scales: ClassVar[Overrides] = {
        "smoke": dict(
            model=TransformerConfig(vocab_size=2000, d_model=64, n_layer=2, n_head=2, d_ff=128,
                                    max_len=64),
            max_train_lines=2000, max_valid_lines=200, seq_len=32, batch_size=16, steps=40,
            warmup=10, eval_every=20, mlm_steps=None, compare_lines=8),
        "gpu": dict(
            model=TransformerConfig(vocab_size=16000, d_model=512, n_layer=8, n_head=8, d_ff=2048,
                                    max_len=256),
            seq_len=256, batch_size=64, steps=1500, lr=6e-4, warmup=150, eval_every=500,
            mlm_steps=6000),
        "paper": dict(
            model=TransformerConfig(vocab_size=28996, d_model=410, n_layer=16, n_head=10, d_ff=2100,
                                    max_len=256),
            corpus="wikitext-103", seq_len=256, batch_size=8, steps=400_000, lr=2.5e-4,
            warmup=1000, weight_decay=0.0, max_norm=0.25, eval_every=5000, mlm_steps=None),
    }

    def steps_for(self, objective: str) -> int:
        """Optimiser steps of one objective (``"causal"`` or ``"mlm"``)."""
        return self.mlm_steps if objective == "mlm" and self.mlm_steps else self.steps

    def fingerprint(self, *parts: object) -> str:
        """Short hash of the model's size and the pretraining recipe (and any extra parts).

        It names the cache entries (tokenizer, encoded corpus, checkpoints), so a changed recipe
        never loads a stale one. ``compare_lines`` changes no checkpoint and is left out;
        ``mlm_steps`` enters only the MLM's fingerprint (part ``"mlm"``), so changing it retrains
        the MLM and nothing else.

        >>> s = PretrainingSettings.at("smoke")
        >>> s.fingerprint("causal") == s.replace(compare_lines=99).fingerprint("causal")
        True
        """
        size = {name: getattr(self.model, name) for name in SIZE_FIELDS}
        recipe = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in _NOT_IN_FINGERPRINT}
        if "mlm" in parts and self.mlm_steps:
            parts = (*parts, f"mlm_steps={self.mlm_steps}")
        blob = json.dumps([size, recipe, *map(str, parts)], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]
