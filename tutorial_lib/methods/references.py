"""Published numbers to set beside each notebook's results, with where they come from.

Only numbers found in the project's reference notes are listed (the notes on the 2019 tutorial
repository and on the methods' papers and code). ``verified`` is True only where the notes read the
number in a source (a README, an abstract, an issue thread, a retrieved paper excerpt); numbers the
notes recalled from memory and tagged "VERIFY", and numbers no source here could confirm, are
``verified=False`` and every report prints them as **unverified**. Check those against the paper
before relying on them, then flip the flag here.

It sits above the chapters (it imports their settings; no chapter imports it). Each entry names its
notebook through that notebook's settings class (``DARTSettings.notebook``, in its chapter's
``settings.py``), so a renamed or renumbered notebook keeps its entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..pretraining_settings import PretrainingSettings
from ..settings import Settings, notebook_name
from .adaptation.settings import (
    AdaptationSettings,
    AdapterSettings,
    DiscriminativeSettings,
    UnfreezingSettings,
)
from .forgetting.settings import ForgettingSettings
from .multitask.settings import GradTSSettings, MultitaskSettings
from .peft.settings import PEFTSettings
from .probing.settings import AmnesicSettings
from .prompts.papers import PAPER_K16
from .prompts.settings import DARTSettings
from .tdt.settings import TDTSettings
from .unlabelled.settings import UnlabelledSettings


@dataclass(frozen=True)
class Reference:
    notebook: str  # the notebook's name, from its settings class (e.g. DARTSettings.notebook)
    what: str
    value: str  # as quoted (a number, a range, or a short qualitative claim)
    unit: str
    source: str
    verified: bool
    note: str = ""


# each notebook's name, as its settings class gives it
_PRETRAINING, _ADAPTATION, _UNFREEZING, _DISCRIMINATIVE = (
    PretrainingSettings.notebook, AdaptationSettings.notebook, UnfreezingSettings.notebook,
    DiscriminativeSettings.notebook)
_MULTITASK, _GRADTS, _TDT, _DART, _AMNESIC = (
    MultitaskSettings.notebook, GradTSSettings.notebook, TDTSettings.notebook, DARTSettings.notebook,
    AmnesicSettings.notebook)
_WOLF_674 = "T. Wolf in huggingface/transformers#674 (2019-06-12)"
_DART_SOURCE = "DART Table 1 / LM-BFF Table 3 (RoBERTa-large, K = 16, mean (std) over 5 splits), recalled"
_DART_NOTE = "recalled in the notes, not checked against the papers"
_NAACL = "huggingface/naacl_transfer_learning_tutorial README"
_DART_NAMES = {"head fine-tuning": "fine-tuning ([CLS], few-shot)",
               "manual prompt": "LM-BFF (manual prompt) as reported in DART",
               "P-tuning": "P-tuning as reported in DART", "DART": "DART"}

REFERENCES: tuple[Reference, ...] = (
    # 01 · pretraining
    Reference(_PRETRAINING, "2019 tutorial: validation perplexity, causal LM, WikiText-103", "≈ 29", "ppl",
              _NAACL, True,
              "50M parameters, ~15 h on 8 V100s. The README does not say per word or per sub-word; "
              "it compares with Transformer-XL's word-level 24, which suggests per word."),
    Reference(_PRETRAINING,
              "Transformer-XL validation perplexity, WikiText-103 (as quoted by the 2019 README)", "≈ 24",
              "ppl", _NAACL, True, "closed (word) vocabulary"),
    Reference(_PRETRAINING, "2019 tutorial model size", "≈ 50M (50.4M counted from its code)", "parameters",
              _NAACL + " and pretraining_model.py", True, "16 layers, d = 410, BERT cased WordPiece"),
    # 02 · adaptation
    Reference(_ADAPTATION, "2019 tutorial: TREC-6 test error after fine-tuning", "3.6", "%",
              "quoted by notebook 02 (2019 tutorial slides / Colab)", False,
              "not in the reference notes: the 2019 repository reports no fine-tuning number and the "
              "slides and Colab could not be read (check the ACL Anthology N19-5004 slides)"),
    # 04, 05 · ULMFiT's tricks, as the 2019 tutorial found them
    Reference(_UNFREEZING, "2019 tutorial: gradual unfreezing vs standard fine-tuning",
              "did not out-perform standard fine-tuning", "", _WOLF_674, True,
              "qualitative; the numbers are in the slides' hands-on part, not readable here"),
    Reference(_DISCRIMINATIVE, "2019 tutorial: discriminative fine-tuning vs standard fine-tuning",
              "did not out-perform standard fine-tuning", "", _WOLF_674, True,
              "qualitative; the numbers are in the slides' hands-on part, not readable here"),
    # 06 · multitask
    Reference(_MULTITASK, "2019 tutorial: multi-task fine-tuning vs standard fine-tuning", "helped", "",
              _WOLF_674, True, "qualitative"),
    Reference(_MULTITASK, "2019 slides, hands-on #6: TREC-6 test error, classification + 0.5 × LM loss",
              "3.4", "%", "2019 tutorial slides (single run)", True,
              "6 epochs; \"Multi-tasking helped us improve over single-task full-model fine-tuning\""),
    Reference(_MULTITASK, "2019 slides, hands-on #2: TREC-6 test error, classification only", "3.6", "%",
              "2019 tutorial slides (single run)", True,
              "3 epochs: the two runs differ in the loss and in the epochs"),
    # 07 · GradTS
    Reference(_GRADTS, "GradTS improvement of MT-DNN (bert-base-cased) against AUTOSEM, 8 GLUE tasks",
              "0.33 to 17.93", "%", "Ma et al. 2021, abstract", True,
              "a range over tasks; whether relative or absolute is not stated in the notes"),
    Reference(_GRADTS, "GradTS time vs AUTOSEM", "21.32 % less on average", "", "Ma et al. 2021, abstract",
              True),
    Reference(_GRADTS, "all-tasks MTL vs single-task; GradTS-trial/-fg",
              "all-tasks hurts some small tasks (WNLI, CoLA, RTE); GradTS recovers or exceeds "
              "single-task; fg ≥ trial", "", "Ma et al. 2021, recalled", False,
              "the per-task table was not retrievable"),
    # 08 · TDT
    Reference(_TDT, "TDT vs fine-tuning on GLUE and CLUE", "consistently better", "",
              "Zeng et al. 2022, abstract", True, "with different PLMs"),
    Reference(_TDT, "TDT − fine-tuning, GLUE average (BERT-base/large, RoBERTa-large)", "+0.5 to +1.5",
              "points", "Zeng et al. 2022, recalled", False,
              "larger on small tasks (RTE, MRPC, CoLA, STS-B) and low-resource subsets; "
              "not checked against Tables 1–3 of arXiv 2203.11431"),
    # 09 · DART / LM-BFF
    # the one copy of these numbers is prompts.papers.PAPER_K16 (09 prints it beside its runs)
    *(Reference(_DART, f"{_DART_NAMES[method]}, {task}", f"{mean:.1f} ({std:.1f})", "% accuracy",
                _DART_SOURCE, False, _DART_NOTE)
      for method, by_task in PAPER_K16.items()
      for task, (mean, std) in zip(("SST-2", "MR", "CR"), (by_task[t] for t in ("sst2", "mr", "cr")))),
    Reference(_DART, "zero-shot prompt, SST-2 (LM-BFF)", "≈ 83.6", "% accuracy", "LM-BFF, recalled",
              False, _DART_NOTE),
    Reference(_DART, "DART without the fluency term, the differentiable template or the "
              "differentiable labels (the paper's ablations)", "each removal lowers accuracy", "",
              "DART (Zhang et al. 2022) ablation study, recalled", False,
              "qualitative: the ablation table's numbers are not in the notes"),
    Reference(_DART, "full-data fine-tuning, SST-2 (LM-BFF)", "≈ 95.0", "% accuracy",
              "LM-BFF, recalled", False, _DART_NOTE),
    # 11 · amnesic probing / INLP
    Reference(_AMNESIC, "INLP, GloVe gender: linear SVM accuracy before → after INLP", "100 → 49.3",
              "% accuracy", "Ravfogel et al. 2020 (paper text)", True,
              "different setting: 300-d GloVe vectors, 35 iterations"),
    Reference(_AMNESIC, "INLP, GloVe gender: 1-hidden-layer MLP after INLP", "85.0", "% accuracy",
              "Ravfogel et al. 2020 (paper text)", True, "INLP guards only linearly"),
    Reference(_AMNESIC, "INLP, GloVe gender: 10 INLP directions vs 10 manual he−she directions removed",
              "54.4 vs 80.7", "% accuracy", "Ravfogel et al. 2020 (paper text)", True),
    Reference(_AMNESIC, "amnesic probing: probing accuracy vs importance for the task",
              "do not correlate", "", "Elazar et al. 2021, abstract", True),
    Reference(_AMNESIC, "amnesic probing, BERT-base: vanilla LM accuracy, masked vs non-masked",
              "≈ 56–57 vs ≈ 94", "% accuracy", "Elazar et al. 2021 Table 2, recalled", False,
              "removing dep / POS hurts far more than as many random directions; copy the cells "
              "from the TACL PDF before quoting"),
    # 18 · unlabelled text
    Reference(UnlabelledSettings.notebook,
              "ULMFiT with 100 labelled examples vs training from scratch", "matches 100× more data",
              "", "Howard & Ruder 2018, abstract (IMDb, TREC-6, AG; LM fine-tuning included)", True,
              "the abstract as quoted by the ACL Anthology and arXiv pages; their semi-supervised "
              "variant (the LM stage on 50–100k unlabelled examples) matches 50× and 100× more data "
              "on IMDb and AG (their talk slides)"),
    Reference(UnlabelledSettings.notebook, "UDA: IMDb test error with 20 labelled examples", "4.20",
              "%", "Xie et al. 2019, abstract (BERT-large, back-translation), recalled", False,
              "better than the previous state of the art trained on 25,000 labels; check the abstract"),
    Reference(UnlabelledSettings.notebook, "TAPT over RoBERTa-base", "gains on all eight tasks",
              "", "Gururangan et al. 2020, Table 5, recalled", False,
              "largest on the smallest datasets; TAPT's text is the task's own training text"),
)

# 14 · parameter-efficient fine-tuning (appended)
_PEFT = PEFTSettings.notebook
REFERENCES = (
    *REFERENCES,
    Reference(_PEFT, "LoRA vs full fine-tuning, RoBERTa-base, GLUE average", "87.2 vs 86.4", "",
              "Hu et al. 2021 Table 2 (checked by the teaching review of 2026-11-27)", True,
              "LoRA r = 8 on W_q and W_v: 0.3M trained parameters against 125M"),
    Reference(_PEFT, "Houlsby adapters vs full fine-tuning, BERT-large, GLUE",
              "within 0.4 points with 3.6 % trained per task", "", "Houlsby et al. 2019, abstract "
              "(checked by the teaching review of 2026-11-27)", True),
    Reference(_PEFT, "BitFit vs full fine-tuning, BERT-large, GLUE", "comparable (about a point)",
              "", "Ben Zaken et al. 2022, recalled", False,
              "the bias terms are under 0.1 % of BERT-large's parameters"),
    Reference(_PEFT, "prompt tuning vs model tuning, T5 on SuperGLUE",
              "the gap closes only near 10B parameters", "", "Lester et al. 2021 Fig. 1, recalled",
              False, "far behind at small sizes; they train the prompt at lr 0.3 for 30k steps"),
    Reference(_PEFT, "(IA)³: share of T0-3B's parameters trained", "≈ 0.01", "%",
              "Liu et al. 2022 (T-Few), recalled", False, "few-shot; ahead of LoRA in their setting"),
    Reference(_PEFT, "P-tuning v2 (deep prefixes) vs fine-tuning, 330M-10B models",
              "comparable, with 0.1-3 % trained", "", "Liu et al. 2022, abstract, recalled", False),
    Reference(_PEFT, "QLoRA: a 65B model fine-tuned on one 48 GB GPU", "4-bit NF4 base + LoRA", "",
              "Dettmers et al. 2023, abstract, recalled", False),
)


# 13 · forgetting, regularised fine-tuning, ensembles, distillation (none of these papers is in the
# reference notes: the entries are recalled; Hinton et al.'s numbers and the slides' content were
# checked by the project's teaching review of 2026-11-27, the rest stay unverified)
_FORGETTING = ForgettingSettings.notebook
_RECALLED = "recalled, not in the reference notes: check the paper"
_REVIEWED = "checked against the paper by the project's teaching review of 2026-11-27"
REFERENCES = (*REFERENCES, *(Reference(_FORGETTING, what, value, unit, source, note == _REVIEWED
                                       or note.startswith("the slides' text"), note) for
                             what, value, unit, source, note in (
    ("L2-SP vs L2 (weight decay) fine-tuning, target accuracy", "better on every target task", "",
     "Li, Grandvalet & Davoine 2018 (ICML), image classification (ResNet, Inception)", _RECALLED),
    ("EWC vs plain SGD on a sequence of tasks", "keeps the old tasks' accuracy where SGD forgets", "",
     "Kirkpatrick et al. 2017 (PNAS), permuted MNIST and Atari", _RECALLED),
    ("LwF vs fine-tuning, old task", "less forgetting, new task as good or better", "",
     "Li & Hoiem 2016 (ECCV) / 2017 (TPAMI), image classification", _RECALLED),
    ("MNIST test errors: large net / small net (hard labels) / small net distilled", "67 / 146 / 74",
     "errors of 10,000", "Hinton, Vinyals & Dean 2015, section 3", _REVIEWED),
    ("speech frame accuracy: baseline / 10-model ensemble / distilled single model",
     "58.9 / 61.1 / 60.8", "% frame accuracy", "Hinton, Vinyals & Dean 2015, Table 1", _REVIEWED),
    ("2019 tutorial slides §4.2.B and §4.3.C", "regularise towards the pretrained weights; "
     "ensembles and distillation get more signal", "", "NAACL 2019 tutorial slides",
     "the slides' text (lines 3036-3089: Wiese et al.'s L2 towards the pretrained weights, EWC's "
     "Ω and a prediction-level Ω; lines 3299-3339: ensembling and distillation): recipes, no "
     "measured numbers"),
)))


def for_notebook(notebook: Settings | type[Settings] | str) -> list[Reference]:
    """The entries for a notebook, by its settings (or its name, ``"02_adaptation"``)."""
    name = notebook_name(notebook)
    return [r for r in REFERENCES if r.notebook == name]


def table(notebook: Settings | type[Settings] | str) -> pd.DataFrame:
    """The entries as a table with a "verified?" column ("yes" / "**unverified**")."""
    rows = [{"reference": r.what, "value": f"{r.value} {r.unit}".strip(), "source": r.source,
             "verified?": "yes" if r.verified else "**unverified**", "note": r.note}
            for r in for_notebook(notebook)]
    return pd.DataFrame(rows, columns=["reference", "value", "source", "verified?", "note"])


# --- the sources' effects, for the power analysis ----------------------------------------------


@dataclass(frozen=True)
class SourceEffect:
    """A source's number for one of our comparisons, as a Δ in our units and sign convention
    (method − baseline; for an error, negative is better), so the report can say whether this run
    could have seen it (``ops.report``: below or above our minimum detectable effect, and the runs
    needed to detect it). Often measured on another benchmark or model: the size is the question."""

    notebook: str
    method: str
    baseline: str
    metric: str  # how the effect record's metric starts
    delta: float
    source: str
    verified: bool
    note: str = ""


_SLIDES = "2019 tutorial slides, hands-on #2/#3/#4/#6 (single runs, TREC-6 test error)"
SOURCE_EFFECTS: tuple[SourceEffect, ...] = (
    SourceEffect(UnfreezingSettings.notebook, "gradual unfreezing", "full fine-tuning", "TREC-6 test error",
                 5.2 - 3.6, _SLIDES, True, "5.2 % (#4) vs 3.6 % (#2)"),
    *(SourceEffect(AdapterSettings.notebook, f"adapters m={m}", "full fine-tuning", "TREC-6 test error",
                   4.0 - 3.6, _SLIDES, True, "4.0 % (#3) vs 3.6 % (#2)") for m in (8, 64)),
    SourceEffect(_MULTITASK, "+ LM loss (1.0 / 0.5)", "classification only", "TREC-6 test error",
                 3.4 - 3.6, _SLIDES, True, "3.4 % (#6, 6 epochs) vs 3.6 % (#2, 3 epochs): the epochs "
                 "differ too"),
    SourceEffect(_TDT, "TDT", "fine-tuning", "sst2 dev (in-domain) error", -0.5,
                 "Zeng et al. 2022 (GLUE average +0.5 to +1.5 points; the low end), recalled", False),
    SourceEffect(PEFTSettings.notebook, "LoRA", "all but embeddings", "trec test error", 86.4 - 87.2,
                 "Hu et al. 2021 Table 2 (RoBERTa-base GLUE average 87.2 vs 86.4), checked by the "
                 "teaching review of 2026-11-27", True,
                 "LoRA better by 0.8 points: −0.8 points of error"),
    # any student size: the metric names its layers ("student (1 layers) …" at classroom)
    SourceEffect(ForgettingSettings.notebook, "KD", "hard labels", "student (",
                 (146 - 74) / 100, "Hinton et al. 2015 §3 (MNIST: 146 → 74 errors of 10,000), checked "
                 "by the teaching review of 2026-11-27", True, "+0.72 points of accuracy"),
)


def source_effect(record: dict) -> SourceEffect | None:
    """The :class:`SourceEffect` for an effect record of ``effects.json`` (None if there is none)."""
    return next((s for s in SOURCE_EFFECTS if s.notebook == record.get("notebook")
                 and s.method == record.get("method") and s.baseline == record.get("baseline")
                 and str(record.get("metric", "")).startswith(s.metric)), None)


# --- the sources' expected signs ------------------------------------------------------------------


@dataclass(frozen=True)
class SourceSign:
    """A source's claimed direction for one of our comparisons where it gives no number in our
    units: ``sign`` "+" (the method better than the baseline) or "-" (worse). ``metric``: how the
    effect record's metric starts ("" for any metric of the notebook's comparison)."""

    notebook: str
    method: str
    baseline: str
    metric: str
    sign: str
    source: str
    verified: bool
    note: str = ""


_GRADTS_CLAIM = "Ma et al. 2021 (GradTS), recalled in the notes"
SOURCE_SIGNS: tuple[SourceSign, ...] = (
    SourceSign(_MULTITASK, "multi-task (all)", "single-task", "", "+",
               "Liu et al. 2019 (MT-DNN), recalled", False,
               "multi-task learning then per-task fine-tuning beats single-task BERT on most GLUE tasks"),
    SourceSign(_MULTITASK, "multi-task (all)", "single-task (equal steps)", "", "+",
               "Liu et al. 2019 (MT-DNN), recalled", False,
               "its single-task baselines are BERT fine-tuned per task with their own recipe, not "
               "cut to the multi-task budget: the claim is about sharing, not about extra updates"),
    SourceSign(_MULTITASK, "sequential (mnli → rte)", "single-task", "rte", "+",
               "Phang et al. 2018 (STILTs), recalled", False,
               "large gains on RTE for BERT after MNLI"),
    *(SourceSign(_GRADTS, method, baseline, "", "+", _GRADTS_CLAIM, False, note)
      for method in ("GradTS-trial", "GradTS-fg") for baseline, note in (
          ("all tasks", "the paper's claim: a chosen set beats all tasks"),
          ("single-task", "GradTS recovers or exceeds single-task"))),
)


def _higher_is_better(metric: str) -> bool:
    return metric.endswith("(higher is better)")  # as tutorial_lib.results.effects writes it


def expected(notebook: Settings | type[Settings] | str, method: str, baseline: str, metric: str
             ) -> tuple[str, str]:
    """The sign the sources expect for ``method`` vs ``baseline`` on ``metric`` (an effect
    record's, "(higher is better)" at its end where so) and the source: "+" better, "-" worse;
    ``("none", "")`` where no source claims a direction. A source's number
    (:data:`SOURCE_EFFECTS`, a Δ in our units) gives its sign; else a claimed direction
    (:data:`SOURCE_SIGNS`)."""
    name = notebook_name(notebook)
    record = {"notebook": name, "method": method, "baseline": baseline, "metric": metric}
    number = source_effect(record)
    if number is not None and number.delta:
        better = (number.delta > 0) == _higher_is_better(metric)
        return ("+" if better else "-"), number.source
    sign = next((c for c in SOURCE_SIGNS if c.notebook == name and c.method == method
                 and c.baseline == baseline and metric.startswith(c.metric)), None)
    return (sign.sign, sign.source) if sign else ("none", "")


def with_expected(notebook: Settings | type[Settings] | str, records: list[dict]) -> list[dict]:
    """Effect records (:func:`tutorial_lib.results.effects`) with ``expected`` and ``source`` taken
    from the sources (:func:`expected`); a record no source speaks to gets ``expected`` "none" and
    keeps its own ``source``."""
    out = []
    for r in records:
        sign, source = expected(notebook, r["method"], r["baseline"], r["metric"])
        out.append({**r, "expected": sign, "source": source or r.get("source", "")})
    return out
