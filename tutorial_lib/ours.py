"""Our pretrained models and their cache: what notebook 01 writes and every later notebook reads.

The contract between :mod:`tutorial_lib.pretraining` (which trains and saves) and
:mod:`tutorial_lib.backbones` (which loads "ours", "ours-mlm" and "scratch"): the scale's recipe,
its tokenizer (trained once on the corpus, cached), the model's configuration for an objective,
the directory a checkpoint lives in (keyed by the recipe's fingerprint) and :func:`load`, which
reads a checkpoint and never trains (:class:`NotPretrained` says how to make one). Loading a model
needs nothing of the training loop, so the backbones sit below pretraining, not above it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from . import data, integrity
from .config import Scale, cache_dir
from .integrity import cache_lock
from .models import CHECKPOINT_FILE, TransformerConfig, TransformerLM, load_pretrained
from .pretraining_settings import PretrainingSettings
from .tokenization import clean_wikitext, load_or_train_tokenizer
from .training import History

OBJECTIVES = ("causal", "mlm")
# our backbones and the objective each was pretrained with (scratch: the causal architecture,
# random weights)
OURS: dict[str, str] = {"ours": "causal", "ours-mlm": "mlm", "scratch": "causal"}
HISTORY_FILE = "history.json"


class PretrainError(ValueError):
    """Bad arguments to the pretraining entry points."""


def _check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise PretrainError(f"unknown objective {objective!r}: choose one of {OBJECTIVES}")


def recipe(scale: Scale, settings: PretrainingSettings | None = None) -> PretrainingSettings:
    """The pretraining settings to use: ``settings`` if given, else the scale's own."""
    return settings if settings is not None else PretrainingSettings.at(scale)


def corpus_lines(scale: Scale, split: str, settings: PretrainingSettings | None = None) -> list[str]:
    """Non-empty, cleaned lines of the pretraining corpus (optionally truncated)."""
    s = recipe(scale, settings)
    limit = s.max_train_lines if split == "train" else s.max_valid_lines
    rows = data.load(s.corpus, validation_fraction=0.0)[split]
    rows = data.column(rows, "text")
    lines = [clean_wikitext(r) for r in rows]
    lines = [ln for ln in lines if ln]
    return lines[:limit] if limit else lines


def get_tokenizer(scale: Scale, settings: PretrainingSettings | None = None) -> PreTrainedTokenizerBase:
    """Our cased WordPiece tokenizer, trained on the corpus once and cached."""
    s = recipe(scale, settings)
    directory = cache_dir(scale.name) / f"tokenizer-{s.fingerprint('tok')}"
    return load_or_train_tokenizer(directory, lambda: corpus_lines(scale, "train", s),
                                   s.model.vocab_size)


def model_config(scale: Scale, tokenizer: PreTrainedTokenizerBase, objective: str,
                 settings: PretrainingSettings | None = None) -> TransformerConfig:
    """The settings' model, sized to the tokenizer, for one objective."""
    return dataclasses.replace(recipe(scale, settings).model, vocab_size=len(tokenizer),
                               causal=objective == "causal", pad_id=tokenizer.pad_token_id)


def run_directory(scale: Scale, objective: str, settings: PretrainingSettings | None = None) -> Path:
    """Where a pretrained checkpoint of one objective lives (shared by all notebooks)."""
    return (cache_dir(scale.name)
            / f"pretrained-{objective}-{recipe(scale, settings).fingerprint(objective)}")


@dataclass
class PretrainResult:
    model: TransformerLM
    tokenizer: PreTrainedTokenizerBase
    directory: Path
    history: History = field(default_factory=History)
    metrics: dict = field(default_factory=dict)  # final validation metrics
    seconds: float = 0.0
    resumed_from: str | None = None


class NotPretrained(PretrainError):
    """A notebook asked for one of our pretrained models that its cache does not hold (yet)."""


def _intact(directory: Path) -> bool:
    return (integrity.check(directory / CHECKPOINT_FILE, "pretrained model")
            and integrity.check(directory / HISTORY_FILE, "training history"))


def load(scale: Scale, objective: str = "causal",
         settings: PretrainingSettings | None = None) -> PretrainResult:
    """The scale's pretrained LM (or that of ``settings``) from the cache; never trains. Not there
    (or damaged): :class:`NotPretrained`, saying how to make it."""
    _check_objective(objective)
    directory = run_directory(scale, objective, settings)
    with cache_lock(directory):  # not while another process (re)builds it
        if not _intact(directory):
            raise NotPretrained(
                f"our {objective} LM at the {scale.name} scale is not in the cache ({directory}): run "
                f"notebook 01, or `pretraining.ensure(settings)` in this notebook (it pretrains "
                f"what the settings need, once per scale and cache)")
        model = load_pretrained(directory, causal=objective == "causal")
        saved = json.loads((directory / HISTORY_FILE).read_text())
        history = History(saved["train"], saved["evals"])
        payload = torch.load(directory / CHECKPOINT_FILE, map_location="cpu", weights_only=True)
        extra = payload.get("extra", {})
        return PretrainResult(model, get_tokenizer(scale, settings), directory, history,
                              extra.get("metrics", {}), float(extra.get("seconds", 0.0)))
