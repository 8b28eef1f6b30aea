"""Tiny random classifiers of the classes the PEFT notebook adapts (BERT as MiniLM, Llama as
SmolLM2: 2 layers, hidden 32, built from a configuration, no download) and a padded batch."""

import torch
from torch import nn
from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel

from tutorial_lib.models import SequenceClassifier

VOCAB, NUM_LABELS = 100, 3
FAMILIES = ("bert", "llama")


def tiny_encoder(family: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    if family == "bert":
        return BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=64, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)).eval()
    # grouped-query attention, as SmolLM2: 4 query heads share 2 key/value heads
    return LlamaModel(LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2,
                                  intermediate_size=64, max_position_embeddings=64)).eval()


def tiny_classifier(family: str, seed: int = 0) -> SequenceClassifier:
    """The same base weights for the same seed (a fresh head from seed + 1)."""
    encoder = tiny_encoder(family, seed)
    torch.manual_seed(seed + 1)
    return SequenceClassifier(encoder, NUM_LABELS, "first" if family == "bert" else "last", dropout=0.0)


def batch(seed: int = 1) -> dict:
    """3 right-padded rows of lengths 7, 5, 3 with labels."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (3, 7), generator=g)
    mask = (torch.arange(7)[None] < torch.tensor([7, 5, 3])[:, None]).long()
    return {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask,
            "labels": torch.randint(0, NUM_LABELS, (3,), generator=g)}


def perturb_trainable(model: nn.Module, seed: int = 2, std: float = 0.5) -> None:
    """Move every trainable tensor away from its initial value (so that an adapter left at its
    identity initialisation cannot pass a reload check by accident)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(std * torch.randn(p.shape, generator=g))
