"""The environment: the one scale knob, every environment variable, the cache directory.

Every notebook starts with ``scale = config.get_scale()`` and then reads its own settings at that
scale (``settings = DARTSettings.at(scale)``, :mod:`tutorial_lib.settings`); sizes are read from
those and never written in a cell. The scale comes from the ``TUTORIAL_SCALE`` environment
variable (default ``classroom``):

==========  ===========================================================================
smoke       CI: each notebook in ≤ 90 s on 2 CPU cores; tiny model, data slices.
classroom   a 2-core laptop: a notebook in ≤ 10 min (README's table), results that mean something.
gpu         one GPU, ≤ 20 min a notebook.
paper       the NAACL-2019 tutorial's hyperparameters (d=410, ff=2100, 16 layers, 10 heads,
            256 positions, ≈50M parameters, WikiText-103): a GPU cluster and internet.
==========  ===========================================================================
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

SCALE_ENV_VAR = "TUTORIAL_SCALE"
CACHE_ENV_VAR = "TUTORIAL_CACHE_DIR"
DATA_ENV_VAR = "TUTORIAL_DATA_DIR"
PRECISION_ENV_VAR = "TUTORIAL_PRECISION"
RESULTS_ENV_VAR = "TUTORIAL_RESULTS_DIR"
PROGRESS_ENV_VAR = "TUTORIAL_PROGRESS"
SEEDS_ENV_VAR = "TUTORIAL_SEEDS"
GPU_MEMORY_ENV_VAR = "TUTORIAL_GPU_MEMORY_GIB"
DEFAULT_SCALE = "classroom"
T = TypeVar("T")

ENV_VARS: dict[str, str] = {
    SCALE_ENV_VAR: "smoke | classroom | gpu | paper (default classroom)",
    DATA_ENV_VAR: "a local copy of the datasets (default: the Hugging Face Hub)",
    CACHE_ENV_VAR: "tokenizers, corpora, checkpoints, converted models (default ~/.cache/tutorial_lib)",
    PRECISION_ENV_VAR: "auto | bf16 | fp16 | fp32 (default auto)",
    RESULTS_ENV_VAR: "where notebooks save their result tables (set by the main job)",
    PROGRESS_ENV_VAR: "0 hides progress bars (set by the main job)",
    SEEDS_ENV_VAR: "main | held-out (default main): held-out moves every seed and split to seed + 1000 "
                   "(benchmarks/replicate.py sets it)",
    GPU_MEMORY_ENV_VAR: "GiB of GPU memory PyTorch may allocate, e.g. 15 to try a Colab T4's fit on "
                        "a larger GPU (default: no cap)",
}
"""Every environment variable the package reads, in one place (the README's table lists them)."""


class ConfigError(ValueError):
    """A bad scale name or configuration value, with a message that says what to do."""


@dataclass(frozen=True)
class ModelSize:
    """Transformer size (see ``tutorial_lib.models.TransformerConfig`` for the meaning)."""

    vocab_size: int
    d_model: int
    n_layer: int
    n_head: int
    d_ff: int
    max_len: int
    dropout: float = 0.1


@dataclass(frozen=True)
class PretrainSettings:
    """Language-model pretraining budget and optimiser settings."""

    corpus: str  # a tutorial_lib.data registry name
    max_train_lines: int | None  # None = the whole corpus
    max_valid_lines: int | None
    seq_len: int
    batch_size: int
    steps: int  # optimiser steps of the causal LM (and of the MLM unless mlm_steps is set)
    lr: float
    warmup: int
    weight_decay: float = 0.01
    grad_accum: int = 1
    max_norm: float = 1.0
    eval_every: int = 200  # steps between evaluations / checkpoints
    mlm_probability: float = 0.15
    # The MLM learns from the 15% masked tokens only, so it needs more steps than the causal LM;
    # its step is cheaper (the output layer runs on the targets only). None = ``steps``.
    mlm_steps: int | None = None
    compare_lines: int = 200  # validation lines a large pretrained LM (SmolLM2) is scored on in 01

    def steps_for(self, objective: str) -> int:
        """Optimiser steps of one objective (``"causal"`` or ``"mlm"``)."""
        return self.mlm_steps if objective == "mlm" and self.mlm_steps else self.steps


@dataclass(frozen=True)
class Scale:
    """What changes between smoke / classroom / gpu / paper for our own model (notebook 01);
    every other notebook's own settings: :mod:`tutorial_lib.settings`."""

    name: str
    model: ModelSize
    pretrain: PretrainSettings
    notes: str = ""
    tiny_hub_models: bool = False  # smoke: Hugging Face backbones become tiny random networks

    def with_pretrain(self, **changes: object) -> Scale:
        """This scale with other pretraining settings (a misspelt name is an error); the cache
        fingerprint changes with them, so nothing stale is loaded.

        >>> get_scale("smoke").with_pretrain(mlm_probability=0.4).pretrain.mlm_probability
        0.4
        """
        names = {f.name for f in dataclasses.fields(PretrainSettings)}
        unknown = set(changes) - names
        if unknown:
            raise ConfigError(f"no pretraining setting(s) {sorted(unknown)}; the settings: {sorted(names)}")
        return dataclasses.replace(self, pretrain=dataclasses.replace(self.pretrain, **changes))

    def fingerprint(self, *parts: object) -> str:
        """Short hash of this scale's model + pretraining settings (and any extra parts).

        Used to name cache entries, so a changed recipe never loads a stale checkpoint.
        ``mlm_steps`` enters only the MLM's fingerprint (part ``"mlm"``), so changing it
        retrains the MLM and nothing else.
        """
        pretrain = dataclasses.asdict(self.pretrain)
        pretrain.pop("compare_lines")  # evaluation only: it changes no checkpoint
        mlm_steps = pretrain.pop("mlm_steps")
        if "mlm" in parts and mlm_steps:
            parts = (*parts, f"mlm_steps={mlm_steps}")
        blob = json.dumps(
            [dataclasses.asdict(self.model), pretrain, *map(str, parts)],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


_SMOKE = Scale(
    name="smoke",
    model=ModelSize(vocab_size=2000, d_model=64, n_layer=2, n_head=2, d_ff=128, max_len=64),
    pretrain=PretrainSettings(
        corpus="wikitext-2", max_train_lines=2000, max_valid_lines=200, seq_len=32,
        batch_size=16, steps=40, lr=1e-3, warmup=10, eval_every=20, compare_lines=8,
    ),
    notes="CI: checks that every cell runs; the numbers mean nothing.",
    tiny_hub_models=True,
)

_CLASSROOM = Scale(
    name="classroom",
    model=ModelSize(vocab_size=8000, d_model=256, n_layer=4, n_head=4, d_ff=1024, max_len=128),
    pretrain=PretrainSettings(
        corpus="wikitext-2", max_train_lines=None, max_valid_lines=None, seq_len=64,
        batch_size=32, steps=400, lr=1e-3, warmup=100, eval_every=200, mlm_steps=800,
    ),
    notes="A 2-core laptop: ~2.5 min of bf16 pretraining per objective on WikiText-2.",
)

_GPU = Scale(
    name="gpu",
    model=ModelSize(vocab_size=16000, d_model=512, n_layer=8, n_head=8, d_ff=2048, max_len=256),
    # Measured on one H200 (results/gpu, 2026-11-27) with 6000 steps for both objectives: the
    # causal LM's validation loss was lowest at step 1000-2000 (4.38 nats) and then rose to 5.82
    # at 6000 (~40 passes over WikiText-2's 2.4M tokens: it memorised the corpus), while the
    # masked LM, which learns from 15 % of the tokens, kept improving to 6000 (3.27). Hence 1500
    # causal steps and 6000 masked ones: about 4 min of 01 on an H200 instead of 6.
    pretrain=PretrainSettings(
        corpus="wikitext-2", max_train_lines=None, max_valid_lines=None, seq_len=256,
        batch_size=64, steps=1500, lr=6e-4, warmup=150, eval_every=500, mlm_steps=6000,
    ),
    notes="One GPU, bf16 autocast.",
)

_PAPER = Scale(
    name="paper",
    model=ModelSize(
        vocab_size=28996, d_model=410, n_layer=16, n_head=10, d_ff=2100, max_len=256
    ),
    pretrain=PretrainSettings(
        corpus="wikitext-103", max_train_lines=None, max_valid_lines=None, seq_len=256,
        batch_size=8, steps=400_000, lr=2.5e-4, warmup=1000, weight_decay=0.0,
        max_norm=0.25, eval_every=5000,
    ),
    notes="The 2019 tutorial's hyperparameters (Transformer-XL WT103 base); needs a GPU cluster.",
)

SCALES: dict[str, Scale] = {s.name: s for s in (_SMOKE, _CLASSROOM, _GPU, _PAPER)}


def get_scale(name: str | None = None) -> Scale:
    """Return the named scale, or the one chosen by ``$TUTORIAL_SCALE`` (default classroom).

    >>> get_scale("smoke").model.n_layer
    2
    """
    chosen = (name or os.environ.get(SCALE_ENV_VAR) or DEFAULT_SCALE).strip().lower()
    if chosen not in SCALES:
        valid = ", ".join(SCALES)
        raise ConfigError(
            f"unknown scale {chosen!r}: choose one of {valid} "
            f"(set the {SCALE_ENV_VAR} environment variable or pass the name)."
        )
    return SCALES[chosen]


# --- seed sets (issue 21: every headline effect replicated on seeds nobody tuned for) -------------
SEED_SETS = {"main": 0, "held-out": 1000}  # name -> offset added to every seed
HELD_OUT_OFFSET = SEED_SETS["held-out"]  # disjoint from every main seed (all < 1000)


def seed_offset() -> int:
    """What this run adds to every seed and few-shot split: :func:`offset_of` ``$TUTORIAL_SEEDS``
    (the one place it is read; unset: main)."""
    return offset_of(os.environ.get(SEEDS_ENV_VAR) or "main")


def offset_of(seed_set_name: str) -> int:
    """A seed set's offset: ``main`` 0, ``held-out`` 1000, or any non-negative integer — a seed set
    of your own (``TUTORIAL_SEEDS=2000``) to replicate a notebook on."""
    chosen = seed_set_name.strip().lower()
    if chosen in SEED_SETS:
        return SEED_SETS[chosen]
    if chosen.isdigit():
        return int(chosen)
    raise ConfigError(f"unknown seed set {chosen!r} in ${SEEDS_ENV_VAR}: choose one of "
                      f"{', '.join(SEED_SETS)} or a non-negative integer offset (or unset it for main)")


def seed_set() -> str:
    """This run's seed set by name: ``"main"``, ``"held-out"``, or ``"offset N"``."""
    offset = seed_offset()
    return next((name for name, o in SEED_SETS.items() if o == offset), f"offset {offset}")


def held_out_seed(seed: int, offset: int = HELD_OUT_OFFSET) -> int:
    """A main seed (or LM-BFF split seed) moved to a seed set: ``seed + offset``."""
    return int(seed) + offset


def apply_seed_set(settings: T, seed_fields: Iterable[str]) -> T:
    """``settings`` (a dataclass) as this run's seed set wants it: unchanged for ``main``, else
    every field in ``seed_fields`` (ints and tuples of ints) moved by :func:`seed_offset`. Which
    fields hold seeds is their type's to say (``tutorial_lib.settings.Seeds``); pretraining is not
    one: a held-out run re-draws fine-tuning seeds and few-shot splits on the same pretrained
    models."""
    offset = seed_offset()
    if offset == 0:
        return settings
    moved = {}
    for name in seed_fields:
        value = getattr(settings, name)
        if isinstance(value, int) and not isinstance(value, bool):
            moved[name] = held_out_seed(value, offset)
        elif isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            moved[name] = tuple(held_out_seed(v, offset) for v in value)
    return dataclasses.replace(settings, **moved)


def cache_dir(*parts: str) -> Path:
    """Directory for tokenizers, encoded corpora and checkpoints (created if missing).

    ``$TUTORIAL_CACHE_DIR`` if set, else ``~/.cache/tutorial_lib``. Entries are namespaced by
    scale name and recipe fingerprint by the callers, so scales never overwrite each other.
    """
    root = Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "tutorial_lib")
    path = root.expanduser().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path

