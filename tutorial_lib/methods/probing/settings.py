"""The settings of 10-11 (probing and amnesic probing).

One frozen dataclass per notebook with its values at every scale; each registers itself with
:mod:`tutorial_lib.settings` by its ``notebook``.
"""

from dataclasses import dataclass
from typing import ClassVar

from ...settings import (
    ALL_SEEDS,
    AlsoNeeds,
    BackboneName,
    BackboneNames,
    Budget,
    LMName,
    Overrides,
    Seed,
    Seeds,
    Settings,
)


@dataclass(frozen=True)
class ProbingSettings(Settings):
    """10: linear probes per layer on UD-EWT (train sentences from train, test from test);
    ``probe_max_iter``: the lbfgs budget of every probe (the same for all)."""

    notebook: ClassVar[str] = "10_probing"
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds(datasets=("ud-ewt",))  # methods.probing reads it

    models: BackboneNames = ("ours", "ours-mlm", "scratch", "minilm", "smollm2")
    train_sentences: int | None = 800
    test_sentences: int | None = 300
    probe_max_iter: int = 100
    control_seed: Seed = 0
    pca_points: int = 1500
    batch_size: int = 64
    max_layers: int | None = 7  # probe at most this many layers per model, evenly spread

    scales: ClassVar[Overrides] = {
        "smoke": dict(train_sentences=80, test_sentences=40, probe_max_iter=30, pca_points=300),
        "gpu": dict(train_sentences=4000, test_sentences=1000, probe_max_iter=200, pca_points=3000,
                    batch_size=128),
        "paper": dict(train_sentences=None, test_sentences=None, probe_max_iter=500, pca_points=5000,
                      batch_size=128),
    }


@dataclass(frozen=True)
class AmnesicSettings(Settings):
    """11: INLP on an LM's hidden states where its head predicts a word (a causal LM: the state
    before each word; a masked LM: ``mask_rounds`` masks of ``mask_fraction`` of the words), run
    ``inlp_seeds`` times on fixed random subsets of ``inlp_positions`` training positions and
    stopped at ``inlp_max_iterations`` (the stated cap); random-direction controls
    (``random_seeds``); every INLP probe must converge (lbfgs ``inlp_classifier_max_iter``,
    ``inlp_classifier_tol``); then adversarial POS heads on TREC-6 for each λ on ``adv_backbone``:
    the POS head first trains alone on the frozen encoder for ``adv_head_warmup_steps`` steps,
    then with the encoder at its own rate ``adv_head_lr`` (the encoder at ``budget.lr``), so that
    at λ = 0 it reads POS (benchmarks/adversary_budget.py chose these).
    The INLP train, INLP dev, adversary and probe-train sentences are disjoint slices of UD train."""

    notebook: ClassVar[str] = "11_amnesic_probing"
    # the adversarial POS heads are trained on TREC-6; INLP's and the adversary's POS labels: UD-EWT
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds(tasks=("trec",), datasets=("ud-ewt",))

    backbone: LMName = "smollm2"  # INLP where its LM head reads
    train_sentences: int = 1500
    dev_sentences: int = 300
    test_sentences: int | None = 300
    mask_rounds: int = 2
    mask_fraction: float = 0.15
    # classroom cut by a quarter (12.6 -> ~9 min on the idle 2-core machine): 5,000 INLP positions,
    # 300 test sentences, 350 adversary examples; 5 random controls (with 3, INLP UPOS vs random
    # did not replicate on the held-out seeds: p = 0.052)
    inlp_positions: int | None = 5000
    inlp_seeds: Seeds = (0, 1, 2)
    inlp_max_iterations: int = 12
    inlp_tol: float = 0.01
    inlp_classifier_max_iter: int = 1000
    inlp_classifier_tol: float = 1e-4
    probe_max_iter: int = 100
    random_seeds: Seeds = (0, 1, 2, 3, 4)
    adv_backbone: BackboneName = "minilm"
    lambdas: tuple[float, ...] = (0.0, 1.0)
    adv_seeds: Seeds = (0, 1, 2)
    adv_train_examples: int | None = 350
    adv_sentences: int = 1500
    adv_batch_size: int = 16
    adv_weight: float = 1.0
    adv_head_lr: float = 1e-2
    adv_head_warmup_steps: int = 50
    adv_probe_train: int = 400
    adv_probe_test: int | None = 200
    budget: Budget = Budget(epochs=2, lr=1e-4)

    scales: ClassVar[Overrides] = {
        "smoke": dict(
            train_sentences=150, dev_sentences=60, test_sentences=40, mask_rounds=1,
            inlp_positions=None, inlp_seeds=(0, 1), inlp_max_iterations=3,
            probe_max_iter=30, random_seeds=(0, 1),
            adv_seeds=(0, 1), adv_head_warmup_steps=4, adv_train_examples=128, adv_sentences=64,
            adv_probe_train=60, adv_probe_test=40, budget=Budget(epochs=1, lr=1e-4)),
        "gpu": dict(
            train_sentences=5000, dev_sentences=1000, test_sentences=2000, mask_rounds=3,
            inlp_positions=None, inlp_max_iterations=40, inlp_classifier_max_iter=2000,
            probe_max_iter=200, lambdas=(0.0, 0.1, 0.3, 1.0, 3.0),
            adv_train_examples=None, adv_sentences=4000, adv_batch_size=32,
            adv_probe_train=2000, adv_probe_test=1000, budget=Budget(epochs=3, lr=1e-4)),
        "paper": dict(
            backbone="bert-base-uncased", adv_backbone="bert-base-uncased",
            train_sentences=6000, dev_sentences=1000, test_sentences=None, mask_rounds=3,
            inlp_positions=None, inlp_max_iterations=100, inlp_classifier_max_iter=2000,
            probe_max_iter=500, lambdas=(0.0, 0.1, 0.3, 1.0, 3.0), adv_seeds=ALL_SEEDS,
            adv_train_examples=None, adv_sentences=4000, adv_batch_size=32,
            adv_probe_train=1000, adv_probe_test=None, budget=Budget(epochs=3, lr=2e-5)),
    }
