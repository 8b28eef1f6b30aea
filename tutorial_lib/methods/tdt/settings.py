"""The settings of 08 (task-guided regularised fine-tuning, TDT).

One frozen dataclass per notebook with its values at every scale; each registers itself with
:mod:`tutorial_lib.settings` by its ``notebook``.
"""

from dataclasses import dataclass
from typing import ClassVar

from ...settings import (
    BackboneName,
    Budget,
    Classification,
    Overrides,
    TaskName,
    TaskNames,
)


@dataclass(frozen=True)
class TDTSettings(Classification):
    """08: TDT vs regularised fine-tuning on ``task``, tested in-domain and on the ``transfer``
    tasks' test splits (never trained on). TDT weights in our units (batchmean KL: upstream's
    kl_rate 2 for 2 classes = 1.0; its hinge margin maxg 2 = 4.0 — at margin 0 the triplet term
    was ≈ 0 and the scorer got no push, ``tdt.from_upstream_margin``); ``collapse_weight``: the
    optional penalty on mean confidence (``tdt.TDTConfig``). ``pair_task``: a sentence-pair task
    (None: skipped)."""

    notebook: ClassVar[str] = "08_tdt"

    task: TaskName = "sst2"
    backbone: BackboneName = "minilm"
    train_examples: int | None = 1200
    validation_examples: int | None = 200
    budget: Budget = Budget(epochs=2, lr=1e-4, group_by_length=True)
    transfer: TaskNames = ("mr", "cr")
    transfer_examples: int | None = None
    baselines: tuple[str, ...] = ("R-Drop", "token cutoff")
    m_rate: float = 1.0
    kl_rate: float = 1.0
    margin: float = 4.0
    collapse_weight: float = 0.0
    rdrop_alpha: float = 1.0
    cutoff_ratio: float = 0.1
    r3f_lambda: float = 1.0
    r3f_eps: float = 1e-5
    pair_task: TaskName | None = None
    pair_train_examples: int | None = None
    show_examples: int = 6
    min_token_count: int = 5

    scales: ClassVar[Overrides] = {
        "smoke": dict(
            train_examples=96, validation_examples=64, budget=Budget(epochs=1, group_by_length=True),
            transfer_examples=100, baselines=("R-Drop", "token cutoff", "R3F"), pair_task="rte",
            pair_train_examples=64, show_examples=4, min_token_count=2),
        "gpu": dict(
            train_examples=2000, validation_examples=1000, budget=Budget(epochs=5, lr=1e-4),
            baselines=("R-Drop", "token cutoff", "R3F"), pair_task="rte", min_token_count=10),
        "paper": dict(
            backbone="bert-base-uncased", validation_examples=2000, budget=Budget(epochs=3, lr=2e-5),
            baselines=("R-Drop", "token cutoff", "R3F"), pair_task="rte", min_token_count=20),
    }
