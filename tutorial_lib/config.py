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
class Scale:
    """One point on the scale knob: its name and what it is for. Every notebook's sizes are its
    own settings class's at this scale (``XSettings.at(scale)``); our model's size and its
    pretraining recipe are notebook 01's (:mod:`tutorial_lib.pretraining_settings`)."""

    name: str
    notes: str = ""
    tiny_hub_models: bool = False  # smoke: Hugging Face backbones become tiny random networks


_SMOKE = Scale("smoke", "CI: checks that every cell runs; the numbers mean nothing.",
               tiny_hub_models=True)
_CLASSROOM = Scale("classroom", "A 2-core laptop: a few minutes of pretraining per objective on "
                                "WikiText-2; each notebook's time is in the README's table.")
# (The notes name no precision and no time: the precision line below them is the run's, and the
# times are the committed runs' in results/classroom/wall_times.json — tests/test_numbers.py.)
_GPU = Scale("gpu", "One GPU, in the autocast precision it is fast at (the precision line).")
_PAPER = Scale("paper", "The 2019 tutorial's hyperparameters (Transformer-XL WT103 base); needs a "
                        "GPU cluster.")

SCALES: dict[str, Scale] = {s.name: s for s in (_SMOKE, _CLASSROOM, _GPU, _PAPER)}


def get_scale(name: str | None = None) -> Scale:
    """Return the named scale, or the one chosen by ``$TUTORIAL_SCALE`` (default classroom).

    >>> get_scale("smoke").tiny_hub_models
    True
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


# --- which scale a Colab notebook takes (its first cell, scripts/sync_notebooks.py) ----------------
# The notebooks with a recorded run at the gpu scale on a GPU: results/gpu/ (wall_times.json,
# peak_memory.json, machine.json, the executed notebook in notebooks/). On Colab the package is
# installed without the repository, so the record ships here. Written by
# `python scripts/sync_notebooks.py` from results/gpu/; tests/test_colab_cell.py checks they agree.
# BEGIN GPU_RECORD (generated)
GPU_RECORD: dict[str, dict[str, str | float]] = {
    "01_pretraining": {"gpu": "NVIDIA H200", "date": "2026-11-27", "minutes": 6.0, "peak_gib": 8.9},
}
# END GPU_RECORD


def colab_scale(notebook: str, has_gpu: bool, device_name: str = "",
                preset: str | None = None) -> tuple[str | None, str]:
    """The scale a notebook's first cell picks on Colab, and why: ``(scale, why)``.

    Your own ``$TUTORIAL_SCALE`` (``preset``) wins. On a GPU runtime, the gpu scale only for a
    notebook with a recorded gpu-scale run on a GPU (:data:`GPU_RECORD`), else the classroom
    scale on the GPU. Without a GPU: ``None`` (nothing set: :func:`get_scale`'s default).

    >>> colab_scale("01_pretraining", True, "Tesla T4")[0], colab_scale("02_adaptation", True)[0]
    ('gpu', 'classroom')
    """
    if preset:
        return preset, "set by you"
    record = GPU_RECORD.get(notebook)
    if not has_gpu:
        hint = "for the gpu scale" if record else "to run it on a GPU"
        return None, f"the default; {hint}: Runtime > Change runtime type > GPU"
    gpu = f"the GPU, {device_name}" if device_name else "the GPU"
    if record:
        return "gpu", (f"chosen for {gpu}: this notebook ran at the gpu scale on one {record['gpu']} "
                       f"({record['date']}: {record['minutes']} min, peak {record['peak_gib']} GiB "
                       "of GPU memory)")
    return DEFAULT_SCALE, (f"on {gpu}: the gpu scale has no recorded run of this notebook on a GPU "
                           "(results/gpu/), the classroom scale has; to try gpu: "
                           "%env TUTORIAL_SCALE=gpu")


def cache_dir(*parts: str) -> Path:
    """Directory for tokenizers, encoded corpora and checkpoints (created if missing).

    ``$TUTORIAL_CACHE_DIR`` if set, else ``~/.cache/tutorial_lib``. Entries are namespaced by
    scale name and recipe fingerprint by the callers, so scales never overwrite each other.
    """
    root = Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "tutorial_lib")
    path = root.expanduser().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path

