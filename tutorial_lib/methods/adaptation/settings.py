"""The settings of 02-05 (fine-tuning and its optimisation schemes).

One frozen dataclass per notebook with its values at every scale; each registers itself with
:mod:`tutorial_lib.settings` by its ``notebook``.
"""

from dataclasses import dataclass
from typing import ClassVar

from ...settings import (
    ALL_SEEDS,
    MINILM_RECIPE,
    AlsoNeeds,
    BackboneName,
    Budget,
    Classification,
    Overrides,
    Seeds,
)


@dataclass(frozen=True)
class AdaptationSettings(Classification):
    """02: our LM vs the same network from scratch (length-grouped batches: half the padding of
    TREC's questions), and a Hugging Face encoder (its budget is 03-04's, so its runs are shared)."""

    notebook: ClassVar[str] = "02_adaptation"
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds(backbones=("scratch",))  # the from-scratch tier

    # 3 epochs for scratch and ours, 4 for the few-label runs until 2026-11-28: on the 2-core Xeon
    # (fp32) 02 would take about 12 minutes on a fresh machine (ours/scratch ≈ 53 s a run,
    # MiniLM ≈ 78 s, a few-label run ≈ 25 s); 2 and 3 epochs bring it under 10
    budget: Budget = Budget(epochs=2, group_by_length=True)
    hf_backbone: BackboneName = "minilm"
    hf_seeds: Seeds = (0, 1, 2)
    hf_budget: Budget = MINILM_RECIPE
    few_labels: int = 1500  # section 4: scratch vs ours with this many training questions
    few_labels_budget: Budget = Budget(epochs=3, group_by_length=True)
    few_labels_seeds: Seeds = (0, 1, 2)

    scales: ClassVar[Overrides] = {
        "smoke": dict(hf_seeds=(0,), hf_budget=Budget(epochs=1, lr=1e-4), few_labels=64,
                      few_labels_budget=Budget(epochs=1, group_by_length=True), few_labels_seeds=(0,)),
        "gpu": dict(hf_budget=Budget(epochs=3, lr=1e-4)),
        "paper": dict(hf_seeds=ALL_SEEDS, hf_budget=Budget(epochs=3, lr=1e-4)),
    }


@dataclass(frozen=True)
class AdapterSettings(Classification):
    """03: Houlsby adapters of each bottleneck size m; feature extraction on cached features.
    The budget is MiniLM's tier of 02, so the full fine-tuning runs are shared (run cache)."""

    notebook: ClassVar[str] = "03_adapters_and_freezing"

    backbone: BackboneName = "minilm"
    budget: Budget = MINILM_RECIPE
    bottlenecks: tuple[int, ...] = (8, 64)
    adapter_lr: float = 1e-3
    train_layer_norms: bool = True
    probe_epochs: int = 20
    probe_lr: float = 3e-3

    # gpu seeds from issue 37's power plan (tutorial_lib/ops/seed_plan.py, its table in docs/gpu.md):
    # the slides' adapter effect (+0.4 points) needs 20 seeds for m = 64 at the spread of the
    # 2026-11-28 classroom run (11 at the earlier run's); m = 8's 51 do not fit the gpu scale's 20
    # minutes. A test holds the seeds to the plan.
    scales: ClassVar[Overrides] = {
        "smoke": dict(bottlenecks=(8,), probe_epochs=3),
        "gpu": dict(bottlenecks=(8, 64, 256), probe_epochs=50, seeds=tuple(range(20))),
        "paper": dict(bottlenecks=(8, 64, 256), probe_epochs=50),
    }


@dataclass(frozen=True)
class UnfreezingSettings(Classification):
    """04: unfreeze the next layer every ``every`` events (ULMFiT's ``"epoch"`` needs
    ≥ n_layer + 2 epochs); ``chain_thaw``: also Felbo et al.'s variant."""

    notebook: ClassVar[str] = "04_gradual_unfreezing"

    backbone: BackboneName = "minilm"
    budget: Budget = MINILM_RECIPE
    every: int = 20
    event: str = "iteration"
    chain_thaw: bool = True

    scales: ClassVar[Overrides] = {"smoke": dict(every=1), "gpu": dict(every=40),
                                   "paper": dict(every=40)}


@dataclass(frozen=True)
class DiscriminativeSettings(Classification):
    """05: η_l = η · ξ^-depth with ξ = ``factor`` (ULMFiT) and the layer-wise ``decay`` of Sun et
    al. 2019 (ξ = 1/decay); STLR's ``cut_frac`` and ``ratio`` (ULMFiT Eq. 3). Its own subset and
    length-grouped batches (to fit the classroom budget), so its baseline is not 02's run."""

    notebook: ClassVar[str] = "05_discriminative_lr"

    backbone: BackboneName = "minilm"
    train_examples: int | None = 2500
    budget: Budget = Budget(epochs=2, lr=1e-4, group_by_length=True)
    factor: float = 2.6
    decay: float = 0.95
    cut_frac: float = 0.1
    ratio: float = 32.0

    scales: ClassVar[Overrides] = {"smoke": dict(budget=Budget(epochs=1, group_by_length=True))}
