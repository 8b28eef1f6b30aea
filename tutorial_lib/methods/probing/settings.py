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
    """11: erasers on an LM's hidden states where its head predicts a word (a causal LM: the state
    before each word; a masked LM: ``mask_rounds`` masks of ``mask_fraction`` of the words). For
    each property and each of ``inlp_seeds``, ``probe_positions`` random training positions are
    held apart for the premise check; INLP is fitted on ``inlp_positions`` of the rest and LEACE on
    ``leace_positions`` (None: all the rest). INLP's probes use the C that ``probe_cs`` chooses on
    dev and must converge (lbfgs ``inlp_classifier_max_iter``, ``inlp_classifier_tol``); INLP
    stops at its rule (dev probe within ``inlp_tol`` of the majority rate) or at
    ``inlp_max_iterations``. The premise check: a fresh probe (C from ``probe_cs``, chosen on
    dev) trained on the held-apart erased positions — out of sample — scored on dev and test.
    Random controls: ``random_seeds`` subspaces per eraser, matched in count, and for UPOS in
    count and variance (within ``matched_tolerance`` of the eraser's share). INLP train, INLP dev
    and test sentences are disjoint (test from UD test).

    Sizes (``benchmarks/erasure_arms.py out-of-sample``, 2026-12-07, 4,000 train sentences, one
    seed, 5,000 probe positions): judged out of sample, LEACE leaves UPOS readable when fitted on
    8,000 positions (dev 0.223 / test 0.209 against majority 0.167 / 0.183) or 16,000 (0.195 /
    0.194) and erases it from 32,000 on (0.177 / 0.176); INLP on 8,000 leaves it at 0.195 / 0.189.
    So 2,600 train sentences (~40,000 positions): LEACE on the ~35,000 the probe leaves; INLP, whose
    cost grows with its positions, stays at 8,000 (the notebook shows its premise fail)."""

    notebook: ClassVar[str] = "11_amnesic_probing"
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds(datasets=("ud-ewt",))  # POS labels: UD-EWT

    backbone: LMName = "smollm2"  # the erasers act where its LM head reads
    train_sentences: int = 2600
    dev_sentences: int = 300
    test_sentences: int | None = 300
    mask_rounds: int = 2
    mask_fraction: float = 0.15
    probe_positions: int = 5000  # held apart for the out-of-sample premise check
    inlp_positions: int | None = 8000
    leace_positions: int | None = None  # None: every position the probe leaves
    inlp_seeds: Seeds = (0, 1, 2)
    inlp_max_iterations: int = 60
    inlp_tol: float = 0.01
    inlp_classifier_max_iter: int = 1000
    inlp_classifier_tol: float = 1e-3
    probe_cs: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0)
    random_seeds: Seeds = (0, 1, 2, 3, 4)
    matched_tolerance: float = 0.02  # |variance share removed: control − eraser| allowed

    scales: ClassVar[Overrides] = {
        "smoke": dict(
            train_sentences=150, dev_sentences=60, test_sentences=40, mask_rounds=1,
            probe_positions=500, inlp_positions=None, inlp_seeds=(0, 1), inlp_max_iterations=3,
            probe_cs=(0.01, 1.0), random_seeds=(0, 1)),
        "gpu": dict(
            train_sentences=5000, dev_sentences=1000, test_sentences=2000, mask_rounds=3,
            probe_positions=10000, inlp_positions=30000, inlp_max_iterations=100,
            inlp_classifier_max_iter=2000),
        "paper": dict(
            backbone="bert-base-uncased", train_sentences=6000, dev_sentences=1000,
            test_sentences=None, mask_rounds=3, probe_positions=10000, inlp_positions=None,
            inlp_max_iterations=100,
            inlp_classifier_max_iter=2000, inlp_classifier_tol=1e-4),
    }


@dataclass(frozen=True)
class AdversarialSettings(Settings):
    """12: the adversarial-head experiment on ``backbone``. An intermediate stage per arm on
    ``stage_sentences`` UD sentences: the POS head trains alone on the frozen encoder for
    ``head_warmup_steps`` steps, then head and encoder together for ``stage_steps`` (the encoder at
    ``stage_lr``, the head at ``head_lr``; a reversed head at ``lambda_``). The demonstration arms
    (:data:`adversarial.ARMS`: POS at λ = 0, the reversed head, inverted and random labels) run once,
    seed ``stage_seed``; the **burn-out** arm (a reversed head re-initialised and retrained every
    ``burnout_reinit_every`` joint steps) and its **movement-matched control** (a reversed head on
    random tags, at ``control_lr``, trained until its linear CKA to the original encoder on the
    first ``movement_sentences`` UD test sentences is within ``control_tolerance`` of the burn-out
    arm's, checked every ``control_check_every`` steps up to ``control_max_steps``) run once per
    seed of ``seeds``. From every stage's encoder: fresh linear and MLP UPOS probes out of sample
    (``probe_train`` sentences; dev and test ``probe_test``), linear CKA to the original encoder;
    from none, the burn-out arm and the control, fine-tuning on the two targets for each of
    ``seeds`` (each on its own stage run) — UD relations on ``deprel_train`` sentences (dev
    ``deprel_dev``, test ``deprel_test``) and TREC-6 on ``trec_train`` questions (dev
    ``trec_dev``) — with ``budget``. Stage, probe and target sentences are disjoint slices of UD
    train (test sentences from UD test). ``head_lr`` 1e-2 with a head-only warm-up: the sweep of
    the old 11's adversary (benchmarks/adversary_budget.py, in git history) — at the encoder's rate
    and without the warm-up the λ = 0 head stayed at the majority rate."""

    notebook: ClassVar[str] = "12_adversarial_heads"
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds(tasks=("trec",), datasets=("ud-ewt",))

    backbone: BackboneName = "minilm"
    # classroom sized on the 2-core Xeon (a MiniLM training step on 16 UD sentences ≈ 0.6 s): four
    # stages of 20 + 40 steps ≈ 2 min, then 30 short fine-tunes (5 arms × 2 targets × 3 seeds)
    stage_sentences: int = 640
    stage_steps: int = 40
    head_warmup_steps: int = 20
    stage_lr: float = 1e-4
    head_lr: float = 1e-2
    lambda_: float = 1.0
    stage_batch_size: int = 16
    stage_seed: Seed = 0  # the demonstration arms' one stage run (the burn-out arm and its control: seeds)
    # issue 59's probe (benchmarks/results/burnout_probe.json, seed 0): of four adversaries — the
    # reversed gradient, the confusion objective, the head re-initialised and retrained every 10
    # joint steps, an MLP head — the re-initialised one left the least UPOS to a fresh probe
    burnout_reinit_every: int = 10
    # the movement-matched control (a reversed head on random tags) trains until its linear CKA to
    # the original encoder, on the first movement_sentences UD test sentences, is within
    # control_tolerance of the burn-out arm's, checked every control_check_every joint steps; at
    # the stage's rate it stopped near CKA 0.13, at 3e-4 it reached the burn-out arm's in 15 steps
    control_lr: float = 3e-4
    control_max_steps: int = 80
    control_check_every: int = 5
    control_tolerance: float = 0.05
    movement_sentences: int = 100
    probe_train: int = 400
    probe_test: int | None = 200
    probe_max_iter: int = 200
    deprel_train: int = 160
    deprel_dev: int = 60
    deprel_test: int | None = 150
    trec_train: int | None = 320
    trec_dev: int | None = 100
    seeds: Seeds = (0, 1, 2)
    budget: Budget = Budget(epochs=2, lr=3e-4, batch_size=16, group_by_length=True)

    scales: ClassVar[Overrides] = {
        "smoke": dict(stage_sentences=48, stage_steps=4, head_warmup_steps=4, burnout_reinit_every=2,
                      control_max_steps=6, control_check_every=2, movement_sentences=16, probe_train=40,
                      probe_test=30, probe_max_iter=50, deprel_train=32, deprel_dev=16,
                      deprel_test=16, trec_train=96, trec_dev=32, seeds=(0, 1),
                      budget=Budget(epochs=1, lr=3e-4, batch_size=16, group_by_length=True)),
        "gpu": dict(stage_sentences=4000, stage_steps=600, head_warmup_steps=200,
                    burnout_reinit_every=150, control_max_steps=1200, control_check_every=75,
                    movement_sentences=500,
                    stage_batch_size=32, probe_train=2000, probe_test=1000, deprel_train=2000,
                    deprel_dev=500, deprel_test=1000, trec_train=None, trec_dev=None,
                    seeds=(0, 1, 2, 3, 4), budget=Budget(epochs=3, lr=1e-4, batch_size=32)),
        "paper": dict(backbone="bert-base-uncased", stage_sentences=8000, stage_steps=2000,
                      burnout_reinit_every=500, control_max_steps=4000, control_check_every=250,
                      movement_sentences=1000,
                      head_warmup_steps=500, stage_batch_size=32, probe_train=4000,
                      probe_test=None, deprel_train=None, deprel_dev=1000, deprel_test=None,
                      trec_train=None, trec_dev=None, seeds=ALL_SEEDS,
                      budget=Budget(epochs=3, lr=2e-5, batch_size=32)),
    }
