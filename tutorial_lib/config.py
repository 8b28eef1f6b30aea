"""The one scale knob, the cache location, and the precision/device choice.

Every notebook starts with ``scale = config.get_scale()``; sizes are read from the returned
``Scale`` and never written in a cell. The scale comes from the ``TUTORIAL_SCALE`` environment
variable (default ``classroom``):

==========  ===========================================================================
smoke       CI: each notebook in ≤ 90 s on 2 CPU cores; tiny model, data slices.
classroom   a 2-core laptop: a notebook in ≤ 6 min (06, 07: ≈ 9, ≈ 12), with results that mean something.
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
from dataclasses import dataclass, field
from pathlib import Path

SCALE_ENV_VAR = "TUTORIAL_SCALE"
CACHE_ENV_VAR = "TUTORIAL_CACHE_DIR"
DEFAULT_SCALE = "classroom"


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

    def steps_for(self, objective: str) -> int:
        """Optimiser steps of one objective (``"causal"`` or ``"mlm"``)."""
        return self.mlm_steps if objective == "mlm" and self.mlm_steps else self.steps


@dataclass(frozen=True)
class FinetuneSettings:
    """Fine-tuning budget shared by every method notebook (equal budgets by construction)."""

    epochs: int
    batch_size: int
    lr: float
    warmup_frac: float
    max_train_examples: int | None  # None = the whole train split
    seeds: tuple[int, ...]
    hf_epochs: int  # epochs for the (slower, larger) Hugging Face backbone
    hf_seeds: tuple[int, ...]
    hf_lr: float = 1e-4
    weight_decay: float = 0.01
    max_norm: float = 1.0
    eval_batch_size: int = 128
    max_eval_examples: int | None = None  # smoke only: cap validation/test sizes


@dataclass(frozen=True)
class Scale:
    """Everything that changes between smoke / classroom / gpu / paper."""

    name: str
    model: ModelSize
    pretrain: PretrainSettings
    finetune: FinetuneSettings
    hf_encoder: str = "minilm"  # see tutorial_lib.models.HF_ENCODERS
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def fingerprint(self, *parts: object) -> str:
        """Short hash of this scale's model + pretraining settings (and any extra parts).

        Used to name cache entries, so a changed recipe never loads a stale checkpoint.
        ``mlm_steps`` enters only the MLM's fingerprint (part ``"mlm"``), so changing it
        retrains the MLM and nothing else.
        """
        pretrain = dataclasses.asdict(self.pretrain)
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
        batch_size=16, steps=40, lr=1e-3, warmup=10, eval_every=20,
    ),
    finetune=FinetuneSettings(
        epochs=1, batch_size=32, lr=1e-3, warmup_frac=0.1, max_train_examples=256,
        seeds=(0, 1), hf_epochs=1, hf_seeds=(0,), max_eval_examples=200,
    ),
    notes="CI: checks that every cell runs; the numbers mean nothing.",
)

_CLASSROOM = Scale(
    name="classroom",
    model=ModelSize(vocab_size=8000, d_model=256, n_layer=4, n_head=4, d_ff=1024, max_len=128),
    pretrain=PretrainSettings(
        corpus="wikitext-2", max_train_lines=None, max_valid_lines=None, seq_len=64,
        batch_size=32, steps=400, lr=1e-3, warmup=100, eval_every=200, mlm_steps=800,
    ),
    finetune=FinetuneSettings(
        epochs=3, batch_size=32, lr=1e-3, warmup_frac=0.1, max_train_examples=None,
        seeds=(0, 1, 2), hf_epochs=2, hf_seeds=(0,), hf_lr=1e-4,
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
    finetune=FinetuneSettings(
        epochs=4, batch_size=32, lr=1e-4, warmup_frac=0.1, max_train_examples=None,
        seeds=(0, 1, 2, 3, 4), hf_epochs=3, hf_seeds=(0, 1, 2),
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
    finetune=FinetuneSettings(
        epochs=3, batch_size=16, lr=6e-5, warmup_frac=0.1, max_train_examples=None,
        seeds=(0, 1, 2, 3, 4), hf_epochs=3, hf_seeds=(0, 1, 2, 3, 4), max_norm=0.25,
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


def cache_dir(*parts: str) -> Path:
    """Directory for tokenizers, encoded corpora and checkpoints (created if missing).

    ``$TUTORIAL_CACHE_DIR`` if set, else ``~/.cache/tutorial_lib``. Entries are namespaced by
    scale name and recipe fingerprint by the callers, so scales never overwrite each other.
    """
    root = Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "tutorial_lib")
    path = root.expanduser().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- per-method settings ---------------------------------------------------------------------
# Sizes that only one method notebook needs, per scale, still chosen here and nowhere else.
# ``method_settings(scale, "adapters")`` returns the dict for the scale.
METHODS: dict[str, dict[str, dict]] = {
    # "adapters": {"smoke": {...}, "classroom": {...}, "gpu": {...}, "paper": {...}},
    # Notebooks 03-05. ``train_examples``: a fixed random subset of TREC-6 train (None = all) and
    # ``epochs``: the budget, the same for each method and its baseline within a notebook.
    # 03: ``bottlenecks`` = adapter sizes m; ``lr`` = the adapters' rate (full fine-tuning keeps
    # the scale's); ``probe_*`` = the feature-extraction classifier on cached features.
    "adapters": {
        "smoke": {"train_examples": None, "epochs": 1, "bottlenecks": (8,), "lr": 1e-3,
                  "train_layer_norms": True, "probe_epochs": 3, "probe_lr": 3e-3},
        "classroom": {"train_examples": 2500, "epochs": 2, "bottlenecks": (8, 64), "lr": 1e-3,
                      "train_layer_norms": True, "probe_epochs": 20, "probe_lr": 3e-3},
        "gpu": {"train_examples": None, "epochs": 4, "bottlenecks": (8, 64, 256), "lr": 1e-3,
                "train_layer_norms": True, "probe_epochs": 50, "probe_lr": 3e-3},
        "paper": {"train_examples": None, "epochs": 3, "bottlenecks": (8, 64, 256), "lr": 1e-3,
                  "train_layer_norms": True, "probe_epochs": 50, "probe_lr": 3e-3},
    },
    # 04: unfreeze the next layer every ``every`` iterations (``event`` "iteration"; ULMFiT's
    # "epoch" needs ≥ n_layer + 2 epochs); ``chain_thaw``: also run Felbo et al.'s variant.
    "unfreezing": {
        "smoke": {"train_examples": None, "epochs": 1, "every": 1, "event": "iteration",
                  "chain_thaw": True},
        "classroom": {"train_examples": 2500, "epochs": 2, "every": 20, "event": "iteration",
                      "chain_thaw": True},
        "gpu": {"train_examples": None, "epochs": 4, "every": 40, "event": "iteration",
                "chain_thaw": True},
        "paper": {"train_examples": None, "epochs": 3, "every": 40, "event": "iteration",
                  "chain_thaw": True},
    },
    # 05: ``factor`` = ξ (η_l = η · ξ^-depth); STLR's ``cut_frac`` and ``ratio`` (ULMFiT Eq. 3).
    "discriminative": {
        "smoke": {"train_examples": None, "epochs": 1, "factor": 2.6, "cut_frac": 0.1,
                  "ratio": 32},
        "classroom": {"train_examples": 2500, "epochs": 2, "factor": 2.6, "cut_frac": 0.1,
                      "ratio": 32},
        "gpu": {"train_examples": None, "epochs": 4, "factor": 2.6, "cut_frac": 0.1, "ratio": 32},
        "paper": {"train_examples": None, "epochs": 3, "factor": 2.6, "cut_frac": 0.1,
                  "ratio": 32},
    },
    # 10: probes per layer on UD-EWT (train sentences from train, test sentences from test);
    # ``probe_max_iter``: the lbfgs budget of every probe (a fixed budget, the same for all).
    "probing": {
        "smoke": {"train_sentences": 80, "test_sentences": 40, "probe_max_iter": 30,
                  "control_seed": 0, "models": ("causal", "mlm", "random", "minilm"),
                  "pca_points": 300, "batch_size": 64},
        "classroom": {"train_sentences": 800, "test_sentences": 300, "probe_max_iter": 100,
                      "control_seed": 0, "models": ("causal", "mlm", "random", "minilm"),
                      "pca_points": 1500, "batch_size": 64},
        "gpu": {"train_sentences": 4000, "test_sentences": 1000, "probe_max_iter": 200,
                "control_seed": 0, "models": ("causal", "mlm", "random", "minilm"),
                "pca_points": 3000, "batch_size": 128},
        "paper": {"train_sentences": None, "test_sentences": None, "probe_max_iter": 500,
                  "control_seed": 0, "models": ("causal", "mlm", "random", "minilm"),
                  "pca_points": 5000, "batch_size": 128},
    },
    # 11: INLP on the MLM's masked positions (``mask_rounds`` masks per sentence), random-
    # direction controls (``random_seeds``), then adversarial POS heads on TREC-6 for each λ.
    # The INLP train, INLP dev, adversary and probe-train sentences are disjoint slices of UD
    # train (their sum must stay below its 12,544 sentences); test sentences come from UD test.
    "amnesic": {
        "smoke": {"train_sentences": 150, "dev_sentences": 60, "test_sentences": 80,
                  "mask_rounds": 1, "mask_fraction": 0.15, "inlp_max_iterations": 4,
                  "inlp_tol": 0.01, "inlp_classifier_max_iter": 30, "probe_max_iter": 30,
                  "random_seeds": (0, 1), "lambdas": (0.0, 1.0), "adv_seeds": (0,),
                  "adv_epochs": 1, "adv_train_examples": 128, "adv_sentences": 64,
                  "adv_batch_size": 16, "adv_weight": 1.0, "adv_probe_train": 60,
                  "adv_probe_test": 40},
        "classroom": {"train_sentences": 1500, "dev_sentences": 300, "test_sentences": 500,
                      "mask_rounds": 2, "mask_fraction": 0.15, "inlp_max_iterations": 15,
                      "inlp_tol": 0.01, "inlp_classifier_max_iter": 100, "probe_max_iter": 100,
                      "random_seeds": (0, 1, 2, 3, 4), "lambdas": (0.0, 0.3, 1.0, 3.0),
                      "adv_seeds": (0, 1), "adv_epochs": 2, "adv_train_examples": 1500,
                      "adv_sentences": 1500, "adv_batch_size": 16, "adv_weight": 1.0,
                      "adv_probe_train": 400, "adv_probe_test": 200},
        "gpu": {"train_sentences": 5000, "dev_sentences": 1000, "test_sentences": 2000,
                "mask_rounds": 3, "mask_fraction": 0.15, "inlp_max_iterations": 40,
                "inlp_tol": 0.01, "inlp_classifier_max_iter": 200, "probe_max_iter": 200,
                "random_seeds": (0, 1, 2, 3, 4), "lambdas": (0.0, 0.1, 0.3, 1.0, 3.0),
                "adv_seeds": (0, 1, 2), "adv_epochs": 3, "adv_train_examples": None,
                "adv_sentences": 4000, "adv_batch_size": 32, "adv_weight": 1.0,
                "adv_probe_train": 2000, "adv_probe_test": 1000},
        "paper": {"train_sentences": 6000, "dev_sentences": 1000, "test_sentences": None,
                  "mask_rounds": 3, "mask_fraction": 0.15, "inlp_max_iterations": 100,
                  "inlp_tol": 0.01, "inlp_classifier_max_iter": 500, "probe_max_iter": 500,
                  "random_seeds": (0, 1, 2, 3, 4), "lambdas": (0.0, 0.1, 0.3, 1.0, 3.0),
                  "adv_seeds": (0, 1, 2, 3, 4), "adv_epochs": 3, "adv_train_examples": None,
                  "adv_sentences": 4000, "adv_batch_size": 32, "adv_weight": 1.0,
                  "adv_probe_train": 1000, "adv_probe_test": None},
    },
    # 08: TDT vs regularised fine-tuning on ``task`` (a fixed ``train_examples`` subset; GLUE's
    # labelled dev is the test split, validation = 10% of train capped at ``validation_examples``),
    # errors also on the ``transfer`` tasks' test splits (never trained on; ``transfer_examples``
    # caps them, None = whole). ``baselines``: any of "R-Drop", "token cutoff", "R3F". TDT weights
    # in our units (batchmean KL: upstream's kl_rate 2 for 2 classes = 1.0). ``pair_task``: a
    # sentence-pair task run with "fine-tuning" and "TDT" (None = skipped at this scale).
    "tdt": {
        "smoke": {"backbone": "pretrained", "task": "sst2", "train_examples": 96,
                  "validation_examples": 64, "transfer": ("mr", "cr"), "transfer_examples": 100,
                  "epochs": 1, "lr": None, "baselines": ("R-Drop", "token cutoff", "R3F"),
                  "m_rate": 1.0, "kl_rate": 1.0, "margin": 0.0, "rdrop_alpha": 1.0,
                  "cutoff_ratio": 0.1, "r3f_lambda": 1.0, "r3f_eps": 1e-5,
                  "pair_task": "rte", "pair_train_examples": 64, "show_examples": 4,
                  "min_token_count": 2},
        "classroom": {"backbone": "pretrained", "task": "sst2", "train_examples": 1000,
                      "validation_examples": 200, "transfer": ("mr", "cr"),
                      "transfer_examples": None, "epochs": 3, "lr": None,
                      "baselines": ("R-Drop", "token cutoff"), "m_rate": 1.0, "kl_rate": 1.0,
                      "margin": 0.0, "rdrop_alpha": 1.0, "cutoff_ratio": 0.1, "r3f_lambda": 1.0,
                      "r3f_eps": 1e-5, "pair_task": None, "pair_train_examples": None,
                      "show_examples": 6, "min_token_count": 5},
        "gpu": {"backbone": "minilm", "task": "sst2", "train_examples": 2000,
                "validation_examples": 1000, "transfer": ("mr", "cr"), "transfer_examples": None,
                "epochs": 5, "lr": None, "baselines": ("R-Drop", "token cutoff", "R3F"),
                "m_rate": 1.0, "kl_rate": 1.0, "margin": 0.0, "rdrop_alpha": 1.0,
                "cutoff_ratio": 0.1, "r3f_lambda": 1.0, "r3f_eps": 1e-5, "pair_task": "rte",
                "pair_train_examples": None, "show_examples": 6, "min_token_count": 10},
        "paper": {"backbone": "bert-base-uncased", "task": "sst2", "train_examples": None,
                  "validation_examples": 2000, "transfer": ("mr", "cr"), "transfer_examples": None,
                  "epochs": 3, "lr": 2e-5, "baselines": ("R-Drop", "token cutoff", "R3F"),
                  "m_rate": 1.0, "kl_rate": 1.0, "margin": 0.0, "rdrop_alpha": 1.0,
                  "cutoff_ratio": 0.1, "r3f_lambda": 1.0, "r3f_eps": 1e-5, "pair_task": "rte",
                  "pair_train_examples": None, "show_examples": 6, "min_token_count": 20},
    },
    # 09: DART on LM-BFF few-shot splits (K per class for train and again for dev, drawn from
    # train; ``splits`` = the LM-BFF seeds used). Every run: ``steps`` AdamW steps of ``batch_size``,
    # the few-shot dev set scored every ``eval_every`` steps, the best dev checkpoint tested once;
    # ``lrs``: the per-split grid of backbone rates (chosen on dev) for [CLS] fine-tuning, the
    # manual prompt and DART; ``prompt_lr``: DART's template/label vectors; ``fluency_weight`` λ
    # and ``mask_rate`` of the fluency constraint. ``k_*``: the accuracy-vs-K curve (None = full
    # train set). ``bad_*``: the deliberately bad verbalizer experiment. ``max_test``: smoke only.
    "dart": {
        "smoke": {"tasks": ("sst2", "mr", "cr", "trec"), "k": 16, "splits": (13, 21),
                  "steps": 4, "batch_size": 8, "eval_every": 2,
                  "lrs": {"cls": (1e-3,), "prompt": (3e-4,), "dart": (3e-4,)},
                  "prompt_lr": 1e-3, "fluency_weight": 1.0, "mask_rate": 0.1, "max_len": 64,
                  "k_task": "sst2", "k_values": (8, 32), "k_splits": (13, 21),
                  "k_methods": ("fine-tuning ([CLS])", "DART"),
                  "bad_task": "sst2", "bad_splits": (13, 21), "max_test": 64},
        "classroom": {"tasks": ("sst2", "mr", "cr", "trec"), "k": 16,
                      "splits": (13, 21, 42, 87, 100),
                      "steps": 30, "batch_size": 8, "eval_every": 10,
                      "lrs": {"cls": (1e-3,), "prompt": (3e-4,), "dart": (3e-4,)},
                      "prompt_lr": 1e-3, "fluency_weight": 1.0, "mask_rate": 0.1, "max_len": 128,
                      "k_task": "sst2", "k_values": (8, 32, 64), "k_splits": (13, 21),
                      "k_methods": ("fine-tuning ([CLS])", "DART"),
                      "bad_task": "sst2", "bad_splits": (13, 21, 42), "max_test": None},
        "gpu": {"tasks": ("sst2", "mr", "cr", "trec"), "k": 16, "splits": (13, 21, 42, 87, 100),
                "steps": 250, "batch_size": 8, "eval_every": 20,
                "lrs": {"cls": (1e-4, 3e-4), "prompt": (3e-5, 1e-4), "dart": (3e-5, 1e-4)},
                "prompt_lr": 3e-4, "fluency_weight": 1.0, "mask_rate": 0.1, "max_len": 256,
                "k_task": "sst2", "k_values": (8, 32, 64, 256, None),
                "k_splits": (13, 21, 42, 87, 100),
                "k_methods": ("fine-tuning ([CLS])", "manual prompt", "DART"),
                "bad_task": "sst2", "bad_splits": (13, 21, 42, 87, 100), "max_test": None},
        "paper": {"tasks": ("sst2", "mr", "cr", "trec"), "k": 16,
                  "splits": (13, 21, 42, 87, 100), "steps": 1000, "batch_size": 8,
                  "eval_every": 100,
                  "lrs": {"cls": (1e-5, 2e-5, 5e-5), "prompt": (1e-5, 2e-5, 5e-5),
                          "dart": (1e-5, 2e-5, 5e-5)},
                  "prompt_lr": 1e-4, "fluency_weight": 1.0, "mask_rate": 0.1, "max_len": 256,
                  "k_task": "sst2", "k_values": (8, 32, 64, 256, None),
                  "k_splits": (13, 21, 42, 87, 100),
                  "k_methods": ("fine-tuning ([CLS])", "manual prompt", "DART"),
                  "bad_task": "sst2", "bad_splits": (13, 21, 42, 87, 100), "max_test": None},
    },
    # 06: (a) TREC-6 with an auxiliary LM loss (``clf_weight`` / ``lm_weight``, the slides' 1.0 /
    # 0.5) on a fixed ``trec_train_examples`` subset for ``trec_epochs``; (b) GLUE ``tasks``
    # fine-tuned single-task and multi-task, and ``sequential`` (intermediate, target) pairs.
    # Every GLUE task: ``train/dev/test_examples`` (fixed subsets of the splits in tutorial_lib.glue),
    # ``steps_per_task`` S batches of ``batch_size`` (single: S; multi-task over n tasks: n·S;
    # sequential: S + S), inputs truncated to ``max_len``; the sampler's ``strategy`` and
    # ``temperature``; ``main_share``: a main task's fixed share of the steps (07); ``lr`` None =
    # the scale's fine-tuning rate.
    "multitask": {
        "smoke": {"backbone": "pretrained", "seeds": (0, 1), "trec_train_examples": 128,
                  "trec_epochs": 1, "clf_weight": 1.0, "lm_weight": 0.5,
                  "tasks": ("sst2", "stsb"), "sequential": (("qqp", "stsb"),),
                  "train_examples": 64, "dev_examples": 32, "test_examples": 32,
                  "steps_per_task": 3, "batch_size": 16, "max_len": 64, "lr": None,
                  "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
        "classroom": {"backbone": "pretrained", "seeds": (0, 1, 2), "trec_train_examples": 2500,
                      "trec_epochs": 2, "clf_weight": 1.0, "lm_weight": 0.5,
                      "tasks": ("sst2", "qqp", "stsb"), "sequential": (("mnli", "stsb"),),
                      "train_examples": 2000, "dev_examples": 300, "test_examples": 1000,
                      "steps_per_task": 80, "batch_size": 32, "max_len": 64, "lr": None,
                      "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
        "gpu": {"backbone": "minilm", "seeds": (0, 1, 2), "trec_train_examples": None,
                "trec_epochs": 3, "clf_weight": 1.0, "lm_weight": 0.5,
                "tasks": ("sst2", "cola", "mrpc", "rte", "stsb", "qqp"),
                "sequential": (("mnli", "rte"), ("mnli", "stsb"), ("qqp", "mrpc")),
                "train_examples": 10000, "dev_examples": 1000, "test_examples": None,
                "steps_per_task": 1000, "batch_size": 32, "max_len": 128, "lr": None,
                "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
        "paper": {"backbone": "bert-base-cased", "seeds": (0, 1, 2, 3, 4),
                  "trec_train_examples": None, "trec_epochs": 3, "clf_weight": 1.0,
                  "lm_weight": 0.5, "tasks": ("sst2", "cola", "mrpc", "rte", "stsb", "qqp", "qnli"),
                  "sequential": (("mnli", "rte"), ("mnli", "stsb"), ("qqp", "mrpc")),
                  "train_examples": None, "dev_examples": None, "test_examples": None,
                  "steps_per_task": 5000, "batch_size": 32, "max_len": 256, "lr": 5e-5,
                  "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
    },
    # 07: GradTS over the GLUE classification ``tasks``: each is fine-tuned alone (seed 0) and its
    # head importance taken on ``importance_batches`` training batches; then for each of
    # ``main_tasks``: single-task, all-tasks MTL, GradTS-trial (main + top-k, k ≤ ``max_k``,
    # chosen on dev with ``trial_seeds``, then run with every seed) and GradTS-fg (the trial's
    # tasks, auxiliary instances filtered by τ: ``keep_fraction`` of them, or τ ≥ ``threshold``).
    # Budget as in 06: the main task gets S = ``steps_per_task`` of its batches in every setting,
    # auxiliaries fill ``1 - main_share`` of the steps.
    "gradts": {
        "smoke": {"backbone": "pretrained", "seeds": (0, 1), "trial_seeds": (0,),
                  "tasks": ("rte", "mrpc", "sst2", "cola"), "main_tasks": ("rte", "mrpc", "sst2"),
                  "max_k": 2, "importance_batches": 2, "keep_fraction": 0.5, "threshold": None,
                  "train_examples": 48, "dev_examples": 32, "test_examples": 32,
                  "steps_per_task": 2, "batch_size": 16, "max_len": 48, "lr": None,
                  "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
        "classroom": {"backbone": "pretrained", "seeds": (0, 1, 2), "trial_seeds": (0,),
                      "tasks": ("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
                      "main_tasks": ("sst2", "qqp", "mnli"), "max_k": 2,
                      "importance_batches": 8, "keep_fraction": 0.5, "threshold": None,
                      "train_examples": 1000, "dev_examples": 200, "test_examples": 500,
                      "steps_per_task": 50, "batch_size": 32, "max_len": 64, "lr": None,
                      "strategy": "temperature", "temperature": 2.0, "main_share": 0.5},
        "gpu": {"backbone": "minilm", "seeds": (0, 1, 2), "trial_seeds": (0, 1, 2),
                "tasks": ("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
                "main_tasks": ("rte", "mrpc", "cola", "sst2"), "max_k": 7,
                "importance_batches": 64, "keep_fraction": 0.5, "threshold": None,
                "train_examples": 10000, "dev_examples": 1000, "test_examples": None,
                "steps_per_task": 1000, "batch_size": 32, "max_len": 128, "lr": None,
                "strategy": "proportional", "temperature": 1.0, "main_share": 0.5},
        "paper": {"backbone": "bert-base-cased", "seeds": (0, 1, 2), "trial_seeds": (0, 1, 2),
                  "tasks": ("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
                  "main_tasks": ("mnli", "rte", "qqp", "qnli", "mrpc", "sst2", "cola", "wnli"),
                  "max_k": 7, "importance_batches": None, "keep_fraction": None,
                  "threshold": 0.62, "train_examples": None, "dev_examples": None,
                  "test_examples": None, "steps_per_task": 10000, "batch_size": 32,
                  "max_len": 256, "lr": 5e-5, "strategy": "proportional", "temperature": 1.0,
                  "main_share": 0.5},
    },
}


def method_settings(scale: Scale, method: str) -> dict:
    """Settings of one method notebook at ``scale`` (a clear error for an unknown method)."""
    if method not in METHODS:
        raise ConfigError(f"no settings for method {method!r}: known methods {sorted(METHODS)}")
    return dict(METHODS[method][scale.name])
