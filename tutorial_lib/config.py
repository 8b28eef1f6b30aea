"""The one scale knob, every setting of every notebook, and every environment variable.

Every notebook starts with ``scale = config.get_scale()`` and ``settings = config.settings(scale,
"<notebook>")``; sizes are read from those and never written in a cell. A student changes a
setting in a cell with ``settings = settings.replace(epochs=4)`` (a misspelt name is an error).
The scale comes from the ``TUTORIAL_SCALE`` environment variable (default ``classroom``):

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
import re
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
    every notebook's own settings: :func:`settings`."""

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
    pretrain=PretrainSettings(
        corpus="wikitext-2", max_train_lines=None, max_valid_lines=None, seq_len=256,
        batch_size=64, steps=6000, lr=6e-4, warmup=500, eval_every=1000,
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


# --- the held-out seed set (issue 21: every headline effect replicated on seeds nobody tuned for) --
SEED_SETS = ("main", "held-out")
HELD_OUT_OFFSET = 1000  # held-out seed = seed + 1000: disjoint from every main seed (all < 1000)
SEED_FIELDS = re.compile(r"(.*_)?(seeds?|splits)")  # the settings fields holding seeds or splits


def seed_set() -> str:
    """``"main"`` or ``"held-out"``: which seed set this run uses (``$TUTORIAL_SEEDS``, default
    main). The one place the variable is read."""
    chosen = (os.environ.get(SEEDS_ENV_VAR) or "main").strip().lower()
    if chosen not in SEED_SETS:
        raise ConfigError(f"unknown seed set {chosen!r} in ${SEEDS_ENV_VAR}: choose one of "
                          f"{', '.join(SEED_SETS)} (or unset it for main)")
    return chosen


def held_out_seed(seed: int) -> int:
    """The held-out counterpart of a main seed (or LM-BFF split seed): ``seed + 1000``."""
    return int(seed) + HELD_OUT_OFFSET


def apply_seed_set(settings: T) -> T:
    """``settings`` (a dataclass) as this run's seed set wants it: unchanged for ``main``; for
    ``held-out`` every field named ``seeds``, ``*_seeds``, ``*_seed``, ``splits`` or ``*_splits``
    moved to :func:`held_out_seed` (ints and tuples of ints). Pretraining is not a seed field: the
    held-out run re-draws fine-tuning seeds and few-shot splits on the same pretrained models."""
    if seed_set() == "main":
        return settings
    moved = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if not SEED_FIELDS.fullmatch(f.name) or isinstance(value, bool):
            continue
        if isinstance(value, int):
            moved[f.name] = held_out_seed(value)
        elif isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            moved[f.name] = tuple(held_out_seed(v) for v in value)
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




# --- every notebook's settings -----------------------------------------------------------------
# One frozen dataclass per notebook: the defaults in the class are the classroom values, and each
# other scale writes only what differs. A misspelt field fails at import (TypeError), and
# ``settings.replace(name=value)`` checks names, so a student's typo in a cell fails at once.


@dataclass(frozen=True)
class Settings:
    """Base class: :meth:`replace` with checked names (also reaching into a nested ``budget``)."""

    def replace(self, **changes: object) -> Settings:
        """A copy with ``changes``; a name that is not a field here may be a field of ``budget``.

        >>> Budget().replace(epochs=4).epochs
        4
        """
        names = {f.name for f in dataclasses.fields(self)}
        inner = {k: v for k, v in changes.items() if k not in names}
        if inner:
            budget = getattr(self, "budget", None)
            budget_names = {f.name for f in dataclasses.fields(Budget)} if budget else set()
            if set(inner) - budget_names:
                raise ConfigError(
                    f"{type(self).__name__} has no setting(s) {sorted(set(inner) - budget_names)}; "
                    f"its settings: {sorted(names | budget_names)}")
            changes = {k: v for k, v in changes.items() if k in names}
            changes["budget"] = budget.replace(**inner)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Budget(Settings):
    """What a fine-tuning run may spend: the same for a method and its baseline."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    warmup_frac: float = 0.1
    weight_decay: float = 0.01
    max_norm: float = 1.0
    eval_batch_size: int = 128
    max_len: int | None = None  # tokens per input (None: the backbone's limit)
    # Length-grouped training batches and length-sorted evaluation: less padding, so faster on a
    # CPU, but other batches than the default shuffle (results are not comparable across it).
    group_by_length: bool = False

    def replace(self, **changes: object) -> Budget:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"Budget has no setting(s) {sorted(unknown)}; its settings: "
                              f"{[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **changes)


# MiniLM's usual fine-tuning recipe (small rate, two epochs), with length-grouped batches; 02-04
# share it, so their identical runs are computed once (the run cache).
MINILM_RECIPE = Budget(epochs=2, lr=1e-4, group_by_length=True)


@dataclass(frozen=True)
class Classification(Settings):
    """A fine-tuning comparison on one task: backbone, data sizes, seeds and the shared budget."""

    task: str = "trec"
    backbone: str = "ours"
    seeds: tuple[int, ...] = (0, 1, 2)
    train_examples: int | None = None  # fixed random subsets (None: the whole split)
    validation_examples: int | None = None
    test_examples: int | None = None
    budget: Budget = Budget()


@dataclass(frozen=True)
class AdaptationSettings(Classification):
    """02: our LM vs the same network from scratch (length-grouped batches: half the padding of
    TREC's questions), and a Hugging Face encoder (its budget is 03-04's, so its runs are shared)."""

    budget: Budget = Budget(group_by_length=True)
    hf_backbone: str = "minilm"
    hf_seeds: tuple[int, ...] = (0, 1, 2)
    hf_budget: Budget = MINILM_RECIPE
    few_labels: int = 1500  # section 4: scratch vs ours with this many training questions
    few_labels_budget: Budget = Budget(epochs=4, group_by_length=True)
    few_labels_seeds: tuple[int, ...] = (0, 1, 2)


@dataclass(frozen=True)
class AdapterSettings(Classification):
    """03: Houlsby adapters of each bottleneck size m; feature extraction on cached features.
    The budget is MiniLM's tier of 02, so the full fine-tuning runs are shared (run cache)."""

    backbone: str = "minilm"
    budget: Budget = MINILM_RECIPE
    bottlenecks: tuple[int, ...] = (8, 64)
    adapter_lr: float = 1e-3
    train_layer_norms: bool = True
    probe_epochs: int = 20
    probe_lr: float = 3e-3


@dataclass(frozen=True)
class UnfreezingSettings(Classification):
    """04: unfreeze the next layer every ``every`` events (ULMFiT's ``"epoch"`` needs
    ≥ n_layer + 2 epochs); ``chain_thaw``: also Felbo et al.'s variant."""

    backbone: str = "minilm"
    budget: Budget = MINILM_RECIPE
    every: int = 20
    event: str = "iteration"
    chain_thaw: bool = True


@dataclass(frozen=True)
class DiscriminativeSettings(Classification):
    """05: η_l = η · ξ^-depth with ξ = ``factor`` (ULMFiT) and the layer-wise ``decay`` of Sun et
    al. 2019 (ξ = 1/decay); STLR's ``cut_frac`` and ``ratio`` (ULMFiT Eq. 3). Its own subset and
    length-grouped batches (to fit the classroom budget), so its baseline is not 02's run."""

    backbone: str = "minilm"
    train_examples: int | None = 2500
    budget: Budget = Budget(epochs=2, lr=1e-4, group_by_length=True)
    factor: float = 2.6
    decay: float = 0.95
    cut_frac: float = 0.1
    ratio: float = 32.0


@dataclass(frozen=True)
class MultiTaskRuns(Settings):
    """Runs over several GLUE tasks (06, 07): every task's splits cut to fixed subsets; the main
    task gets S = ``steps_per_task`` batches in every setting (multi-task over n tasks: n·S steps,
    a main task with fixed share p: S/p steps); inputs truncated to ``budget.max_len``."""

    backbone: str = "minilm"
    seeds: tuple[int, ...] = (0, 1, 2)
    tasks: tuple[str, ...] = ("sst2", "mr")
    train_examples: int | None = 2000
    dev_examples: int | None = 300
    test_examples: int | None = 1000
    steps_per_task: int = 40
    strategy: str = "temperature"  # "proportional", "temperature" or "round-robin"
    temperature: float = 2.0
    main_share: float = 0.5
    budget: Budget = Budget(lr=1e-4, batch_size=16, max_len=128)


@dataclass(frozen=True)
class MultitaskSettings(MultiTaskRuns):
    """06: (a) TREC-6 + an auxiliary LM loss on our causal LM (the slides' 1.0 / 0.5; it needs an
    LM head); (b) GLUE single-task vs multi-task; (c) ``sequential`` (intermediate, target) pairs
    (STILTs), ``intermediate_steps`` on the intermediate task first."""

    trec_backbone: str = "ours"
    trec_train_examples: int | None = 2500
    test_examples: int | None = 600
    budget: Budget = Budget(lr=1e-4, batch_size=16, max_len=128, group_by_length=True)
    trec_budget: Budget = Budget(epochs=2, lr=1e-3, group_by_length=True)
    clf_weight: float = 1.0
    lm_weight: float = 0.5
    sequential: tuple[tuple[str, str], ...] = (("mnli", "rte"),)
    intermediate_steps: int = 100


@dataclass(frozen=True)
class GradTSSettings(MultiTaskRuns):
    """07: head importance on ``importance_batches`` batches per task; for each main task:
    single, all tasks, GradTS-trial (top-k, k ≤ ``max_k``, chosen on dev with ``trial_seeds``) and
    GradTS-fg (instances kept by τ: ``keep_fraction`` of them, or τ ≥ ``threshold``)."""

    tasks: tuple[str, ...] = ("sst2", "qnli", "mrpc", "rte", "mnli", "cola")
    main_tasks: tuple[str, ...] = ("sst2",)
    trial_seeds: tuple[int, ...] = (0,)
    max_k: int | None = 2
    importance_batches: int | None = 8
    keep_fraction: float | None = 0.5
    threshold: float | None = None
    train_examples: int | None = 1000
    dev_examples: int | None = 200
    test_examples: int | None = 500
    steps_per_task: int = 40
    budget: Budget = Budget(lr=1e-4, batch_size=16, max_len=64)


@dataclass(frozen=True)
class TDTSettings(Classification):
    """08: TDT vs regularised fine-tuning on ``task``, tested in-domain and on the ``transfer``
    tasks' test splits (never trained on). TDT weights in our units (batchmean KL: upstream's
    kl_rate 2 for 2 classes = 1.0). ``pair_task``: a sentence-pair task (None: skipped)."""

    task: str = "sst2"
    backbone: str = "minilm"
    train_examples: int | None = 1200
    validation_examples: int | None = 200
    budget: Budget = Budget(epochs=2, lr=1e-4, group_by_length=True)
    transfer: tuple[str, ...] = ("mr", "cr")
    transfer_examples: int | None = None
    baselines: tuple[str, ...] = ("R-Drop", "token cutoff")
    m_rate: float = 1.0
    kl_rate: float = 1.0
    margin: float = 0.0
    rdrop_alpha: float = 1.0
    cutoff_ratio: float = 0.1
    r3f_lambda: float = 1.0
    r3f_eps: float = 1e-5
    pair_task: str | None = None
    pair_train_examples: int | None = None
    show_examples: int = 6
    min_token_count: int = 5


@dataclass(frozen=True)
class DARTSettings(Settings):
    """09: LM-BFF few-shot splits (K per class, ``splits`` = seeds); every run ``steps`` AdamW
    steps of ``batch_size``, dev scored every ``eval_every`` steps, the best dev checkpoint tested
    once; ``*_lrs``: per-split grids of the backbone rate (chosen on dev); ``prompt_lr``: DART's
    template/label vectors; ``fluency_weight`` λ and ``mask_rate`` (masked LMs). On a CPU every
    method trains only the top ``trainable_layers`` layers of a causal LM (None: all).
    ``bad_splits``: the splits also trained with a deliberately bad verbalizer (zero-shot is
    always measured)."""

    backbone: str = "smollm2"
    cls_backbone: str = "smollm2"
    tasks: tuple[str, ...] = ("sst2",)
    k: int = 16
    splits: tuple[int, ...] = (13, 21, 42, 87, 100)
    steps: int = 20
    batch_size: int = 8
    eval_every: int = 10
    cls_lrs: tuple[float, ...] = (1e-4,)
    prompt_lrs: tuple[float, ...] = (1e-5,)
    dart_lrs: tuple[float, ...] = (1e-5,)
    prompt_lr: float = 1e-3
    fluency_weight: float = 0.1
    mask_rate: float = 0.1
    max_len: int = 128
    trainable_layers: int | None = 6
    bad_splits: tuple[int, ...] = ()
    test_examples: int | None = 300


@dataclass(frozen=True)
class ProbingSettings(Settings):
    """10: linear probes per layer on UD-EWT (train sentences from train, test from test);
    ``probe_max_iter``: the lbfgs budget of every probe (the same for all)."""

    models: tuple[str, ...] = ("ours", "ours-mlm", "scratch", "minilm", "smollm2")
    train_sentences: int | None = 800
    test_sentences: int | None = 300
    probe_max_iter: int = 100
    control_seed: int = 0
    pca_points: int = 1500
    batch_size: int = 64
    max_layers: int | None = 7  # probe at most this many layers per model, evenly spread


@dataclass(frozen=True)
class AmnesicSettings(Settings):
    """11: INLP on an LM's hidden states where its head predicts a word (a causal LM: the state
    before each word; a masked LM: ``mask_rounds`` masks of ``mask_fraction`` of the words), run
    ``inlp_seeds`` times on fixed random subsets of ``inlp_positions`` training positions and
    stopped at ``inlp_max_iterations`` (the stated cap); random-direction controls
    (``random_seeds``); then adversarial POS heads on TREC-6 for each λ on ``adv_backbone``.
    The INLP train, INLP dev, adversary and probe-train sentences are disjoint slices of UD train."""

    backbone: str = "smollm2"
    train_sentences: int = 1500
    dev_sentences: int = 300
    test_sentences: int | None = 500
    mask_rounds: int = 2
    mask_fraction: float = 0.15
    inlp_positions: int | None = 8000
    inlp_seeds: tuple[int, ...] = (0, 1, 2)
    inlp_max_iterations: int = 12
    inlp_tol: float = 0.01
    inlp_classifier_max_iter: int = 100
    probe_max_iter: int = 100
    random_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    adv_backbone: str = "minilm"
    lambdas: tuple[float, ...] = (0.0, 1.0, 3.0)
    adv_seeds: tuple[int, ...] = (0, 1)
    adv_train_examples: int | None = 500
    adv_sentences: int = 1500
    adv_batch_size: int = 16
    adv_weight: float = 1.0
    adv_probe_train: int = 400
    adv_probe_test: int | None = 200
    budget: Budget = Budget(epochs=2, lr=1e-4)


_ALL_SEEDS = (0, 1, 2, 3, 4)
_SMOKE_CLS = dict(train_examples=256, validation_examples=200, test_examples=200, seeds=(0, 1),
                  budget=Budget(epochs=1))
_GPU_CLS = dict(train_examples=None, seeds=_ALL_SEEDS, budget=Budget(epochs=4, lr=1e-4))
_PAPER_CLS = dict(train_examples=None, seeds=_ALL_SEEDS,
                  budget=Budget(epochs=3, batch_size=16, lr=6e-5, max_norm=0.25))
_GPU_MT = dict(backbone="minilm", train_examples=10000, dev_examples=1000, test_examples=None,
               steps_per_task=1000, budget=Budget(lr=1e-4, batch_size=32, max_len=128))
_PAPER_MT = dict(backbone="bert-base-cased", train_examples=None, dev_examples=None,
                 test_examples=None, budget=Budget(lr=5e-5, batch_size=32, max_len=256))

SETTINGS: dict[str, dict[str, Settings]] = {
    "02_adaptation": {
        "smoke": AdaptationSettings(**_SMOKE_CLS, hf_seeds=(0,), hf_budget=Budget(epochs=1, lr=1e-4),
                                    few_labels=64, few_labels_budget=Budget(epochs=1, group_by_length=True),
                                    few_labels_seeds=(0,)),
        "classroom": AdaptationSettings(),
        "gpu": AdaptationSettings(**_GPU_CLS, hf_seeds=(0, 1, 2), hf_budget=Budget(epochs=3, lr=1e-4)),
        "paper": AdaptationSettings(**_PAPER_CLS, hf_seeds=_ALL_SEEDS,
                                    hf_budget=Budget(epochs=3, lr=1e-4)),
    },
    "03_adapters_and_freezing": {
        "smoke": AdapterSettings(**_SMOKE_CLS, bottlenecks=(8,), probe_epochs=3),
        "classroom": AdapterSettings(),
        "gpu": AdapterSettings(**_GPU_CLS, bottlenecks=(8, 64, 256), probe_epochs=50),
        "paper": AdapterSettings(**_PAPER_CLS, bottlenecks=(8, 64, 256), probe_epochs=50),
    },
    "04_gradual_unfreezing": {
        "smoke": UnfreezingSettings(**_SMOKE_CLS, every=1),
        "classroom": UnfreezingSettings(),
        "gpu": UnfreezingSettings(**_GPU_CLS, every=40),
        "paper": UnfreezingSettings(**_PAPER_CLS, every=40),
    },
    "05_discriminative_lr": {
        "smoke": DiscriminativeSettings(**{**_SMOKE_CLS,
                                           "budget": Budget(epochs=1, group_by_length=True)}),
        "classroom": DiscriminativeSettings(),
        "gpu": DiscriminativeSettings(**_GPU_CLS),
        "paper": DiscriminativeSettings(**_PAPER_CLS),
    },
    "06_multitask": {
        "smoke": MultitaskSettings(
            seeds=(0, 1), trec_train_examples=128,
            trec_budget=Budget(epochs=1, lr=1e-3, group_by_length=True),
            tasks=("sst2", "mr"), sequential=(("mnli", "rte"),), train_examples=64,
            dev_examples=32, test_examples=32, steps_per_task=3, intermediate_steps=3,
            budget=Budget(lr=1e-4, batch_size=16, max_len=64, group_by_length=True)),
        "classroom": MultitaskSettings(),
        "gpu": MultitaskSettings(
            **_GPU_MT, trec_train_examples=None, trec_budget=Budget(epochs=3, lr=1e-3),
            tasks=("sst2", "cola", "mrpc", "rte", "stsb", "qqp"),
            sequential=(("mnli", "rte"), ("mnli", "stsb"), ("qqp", "mrpc")), intermediate_steps=2000),
        "paper": MultitaskSettings(
            **_PAPER_MT, seeds=_ALL_SEEDS, trec_train_examples=None,
            trec_budget=Budget(epochs=3, lr=6e-5),
            tasks=("sst2", "cola", "mrpc", "rte", "stsb", "qqp", "qnli"),
            sequential=(("mnli", "rte"), ("mnli", "stsb"), ("qqp", "mrpc")), steps_per_task=5000,
            intermediate_steps=20000),
    },
    "07_gradts": {
        "smoke": GradTSSettings(
            seeds=(0, 1), tasks=("rte", "mrpc", "sst2", "cola"), main_tasks=("sst2",),
            importance_batches=2, train_examples=48, dev_examples=32, test_examples=32,
            steps_per_task=2, budget=Budget(lr=1e-4, batch_size=16, max_len=48)),
        "classroom": GradTSSettings(),
        "gpu": GradTSSettings(
            **_GPU_MT, tasks=("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
            trial_seeds=(0, 1, 2), main_tasks=("rte", "mrpc", "cola", "sst2"), max_k=7,
            importance_batches=64, strategy="proportional", temperature=1.0),
        "paper": GradTSSettings(
            **_PAPER_MT, tasks=("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
            trial_seeds=(0, 1, 2),
            main_tasks=("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"), max_k=7,
            importance_batches=None, keep_fraction=None, threshold=0.62, steps_per_task=10000,
            strategy="proportional", temperature=1.0),
    },
    "08_tdt": {
        "smoke": TDTSettings(
            train_examples=96, validation_examples=64, test_examples=200, seeds=(0, 1),
            budget=Budget(epochs=1, group_by_length=True), transfer_examples=100,
            baselines=("R-Drop", "token cutoff", "R3F"), pair_task="rte", pair_train_examples=64,
            show_examples=4, min_token_count=2),
        "classroom": TDTSettings(),
        "gpu": TDTSettings(
            backbone="minilm", train_examples=2000, validation_examples=1000, seeds=_ALL_SEEDS,
            budget=Budget(epochs=5, lr=1e-4), baselines=("R-Drop", "token cutoff", "R3F"),
            pair_task="rte", min_token_count=10),
        "paper": TDTSettings(
            backbone="bert-base-uncased", train_examples=None, validation_examples=2000,
            seeds=_ALL_SEEDS, budget=Budget(epochs=3, lr=2e-5),
            baselines=("R-Drop", "token cutoff", "R3F"), pair_task="rte", min_token_count=20),
    },
    "09_dart": {
        "smoke": DARTSettings(splits=(13, 21), steps=4, eval_every=2, max_len=64,
                              trainable_layers=1, bad_splits=(13,), test_examples=32),
        "classroom": DARTSettings(),
        "gpu": DARTSettings(
            tasks=("sst2", "mr", "cr", "trec"), steps=250, eval_every=20, cls_lrs=(1e-5, 3e-5),
            prompt_lrs=(1e-5, 3e-5), dart_lrs=(1e-5, 3e-5), prompt_lr=3e-4, max_len=256,
            trainable_layers=None, bad_splits=(13, 21, 42, 87, 100), test_examples=None),
        "paper": DARTSettings(
            backbone="roberta-large", cls_backbone="roberta-large",
            tasks=("sst2", "mr", "cr", "trec"), steps=1000, eval_every=100,
            cls_lrs=(1e-5, 2e-5, 5e-5), prompt_lrs=(1e-5, 2e-5, 5e-5), dart_lrs=(1e-5, 2e-5, 5e-5),
            prompt_lr=1e-4, fluency_weight=1.0, max_len=256, trainable_layers=None,
            bad_splits=(13, 21, 42, 87, 100), test_examples=None),
    },
    "10_probing": {
        "smoke": ProbingSettings(train_sentences=80, test_sentences=40, probe_max_iter=30,
                                 pca_points=300),
        "classroom": ProbingSettings(),
        "gpu": ProbingSettings(train_sentences=4000, test_sentences=1000, probe_max_iter=200,
                               pca_points=3000, batch_size=128),
        "paper": ProbingSettings(train_sentences=None, test_sentences=None, probe_max_iter=500,
                                 pca_points=5000, batch_size=128),
    },
    "11_amnesic_probing": {
        "smoke": AmnesicSettings(
            train_sentences=150, dev_sentences=60, test_sentences=80, mask_rounds=1,
            inlp_positions=None, inlp_seeds=(0, 1), inlp_max_iterations=3,
            inlp_classifier_max_iter=30, probe_max_iter=30, random_seeds=(0, 1), lambdas=(0.0, 1.0),
            adv_seeds=(0,), adv_train_examples=128, adv_sentences=64, adv_probe_train=60,
            adv_probe_test=40, budget=Budget(epochs=1, lr=1e-4)),
        "classroom": AmnesicSettings(),
        "gpu": AmnesicSettings(
            train_sentences=5000, dev_sentences=1000, test_sentences=2000, mask_rounds=3,
            inlp_positions=None, inlp_max_iterations=40, inlp_classifier_max_iter=200,
            probe_max_iter=200, lambdas=(0.0, 0.1, 0.3, 1.0, 3.0), adv_seeds=(0, 1, 2),
            adv_train_examples=None, adv_sentences=4000, adv_batch_size=32,
            adv_probe_train=2000, adv_probe_test=1000, budget=Budget(epochs=3, lr=1e-4)),
        "paper": AmnesicSettings(
            backbone="bert-base-uncased", adv_backbone="bert-base-uncased",
            train_sentences=6000, dev_sentences=1000, test_sentences=None, mask_rounds=3,
            inlp_positions=None, inlp_max_iterations=100, inlp_classifier_max_iter=500,
            probe_max_iter=500, lambdas=(0.0, 0.1, 0.3, 1.0, 3.0), adv_seeds=_ALL_SEEDS,
            adv_train_examples=None, adv_sentences=4000, adv_batch_size=32,
            adv_probe_train=1000, adv_probe_test=None, budget=Budget(epochs=3, lr=2e-5)),
    },
}


def settings(scale: Scale, notebook: str) -> Settings:
    """The settings of ``notebook`` (e.g. ``"03_adapters_and_freezing"`` or just ``"03"``) at
    ``scale``."""
    matches = [n for n in SETTINGS if n == notebook or n.split("_", 1)[0] == notebook]
    if len(matches) != 1:
        raise ConfigError(f"no settings for notebook {notebook!r}: known notebooks {sorted(SETTINGS)}")
    return SETTINGS[matches[0]][scale.name]
