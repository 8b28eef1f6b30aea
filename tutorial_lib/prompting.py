"""Prompt-based classification with a masked LM (LM-BFF style), and the few-shot loop (09).

A task becomes a cloze question: a **template** with one ``[MASK]`` wraps the input
(``"<x> It was [MASK] ."``) and a **verbalizer** maps each label to a word (negative → "terrible",
positive → "great"). The class scores are the masked LM's logits at ``[MASK]`` restricted to the
label words,

    p(y | x) = softmax_y( h_[MASK] · e_{v(y)} + b_{v(y)} ),

so the classifier *is* the pretrained LM head: no new parameters (Schick & Schütze 2021,
Gao et al. 2021). Any masked LM works through :class:`MaskedLM`: our MLM from notebook 01
(:class:`OurMaskedLM`, pretrained on WikiText lines ended by [SEP], without [CLS]) or any
Hugging Face ``AutoModelForMaskedLM`` (:class:`HFMaskedLM`, e.g. ``roberta-large`` on Colab).

Baselines for notebook 09: [CLS]-head fine-tuning (``finetuning.make_backbone``) and manual-prompt
fine-tuning (:class:`PromptClassifier`); DART is in ``tutorial_lib.dart``. All three are trained by
:func:`train_fewshot` (a fixed number of steps, the checkpoint chosen on the few-shot *dev* set,
test evaluated once at the end) and compared by :func:`compare_fewshot`.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F
from ignite.engine import Events
from torch import nn
from torch.utils.data import DataLoader

from .fewshot import FewShotSplit
from .models import Output, TransformerLM
from .pretraining import ADAM_BETAS, ADAM_EPS
from .runtime import autocast_dtype, device, seed_everything
from .training import attach_schedule, create_classifier_evaluator, create_trainer, pad_collate

MASK, TEXT = "[MASK]", "<x>"

# LM-BFF's templates (single-sentence tasks) and candidate label words, best first: the first
# candidate that is a single token of the backbone's vocabulary is used (LM-BFF's own words —
# "terrible"/"great" — are not in our 8k WikiText vocabulary).
TEMPLATES = {"sst2": "<x> It was [MASK] .", "mr": "<x> It was [MASK] .",
             "cr": "<x> It was [MASK] .", "mpqa": "<x> It was [MASK] .",
             "sst5": "<x> It was [MASK] .", "subj": "<x> This is [MASK] .",
             "trec": "[MASK] : <x>", "cola": "<x> This is [MASK] ."}
_POLARITY = {"negative": ("terrible", "bad", "poor", "no"),
             "positive": ("great", "good", "best", "yes")}
VERBALIZER_CANDIDATES: dict[str, dict[str, Sequence[str]]] = {
    "sst2": _POLARITY, "mr": _POLARITY, "cr": _POLARITY, "mpqa": _POLARITY,
    "trec": {"ABBR": ("Expression", "expression", "abbreviation", "short", "name"),
             "ENTY": ("Entity", "entity", "thing", "object", "type", "what", "it"),
             "DESC": ("Description", "description", "definition", "reason", "way"),
             "HUM": ("Human", "human", "person", "man", "who"),
             "LOC": ("Location", "location", "place", "city", "where"),
             "NUM": ("Number", "number", "amount", "year", "when")},
}


class PromptError(ValueError):
    """A template, verbalizer or backbone that cannot make a prompt classifier."""


# --- masked LMs -----------------------------------------------------------------------------------


class MaskedLM(nn.Module):
    """The pieces of a masked LM that prompting needs, the same for our model and Hugging Face's.

    ``features(ids, mask)`` gives the vectors the decoder reads ([B, T, D]); the MLM logits are
    ``features @ decoder_weight.T + decoder_bias``. ``input_embeddings``/``set_input_embeddings``
    expose the token-embedding module (DART swaps in an extended one).
    """

    tokenizer: object
    is_ours: bool = False

    @property
    def vocab_size(self) -> int:
        return self.decoder_weight.shape[0]

    @property
    def mask_id(self) -> int:
        return self.tokenizer.mask_token_id

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id

    def piece_ids(self, text: str, first: bool = False) -> list[int]:
        """Word-piece ids of ``text`` without special tokens; a leading space unless ``first``
        (byte-level BPE such as RoBERTa's has different ids for "great" and " great")."""
        text = text.strip()
        if not text:
            return []
        return self.tokenizer(text if first else " " + text, add_special_tokens=False)["input_ids"]

    def special_wrap(self) -> tuple[list[int], list[int]]:
        """Special ids before and after a sequence."""
        raise NotImplementedError

    def backbone_parameters(self) -> list[nn.Parameter]:
        return list(self.parameters())


class OurMaskedLM(MaskedLM):
    """Our ``TransformerLM`` (``config.causal=False``). Inputs end with [SEP], no [CLS]: the MLM was
    pretrained on WikiText lines each followed by [SEP]. The head is the tied embedding matrix."""

    is_ours = True

    def __init__(self, lm: TransformerLM, tokenizer):
        super().__init__()
        if lm.config.causal:
            raise PromptError("prompting needs a masked LM: load_or_pretrain(scale, 'mlm')")
        self.lm, self.tokenizer = lm, tokenizer
        self.max_len = lm.config.max_len

    def input_embeddings(self) -> nn.Module:
        return self.lm.transformer.tok_emb

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.lm.transformer.tok_emb = module

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.lm.lm_head.weight

    @property
    def decoder_bias(self) -> torch.Tensor | None:
        return None

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.lm.transformer(input_ids, attention_mask).last_hidden_state

    def special_wrap(self) -> tuple[list[int], list[int]]:
        return [], [self.tokenizer.sep_token_id]


class HFMaskedLM(MaskedLM):
    """Any Hugging Face ``*ForMaskedLM`` (BERT, RoBERTa, ALBERT ...). The features are the input of
    its output-embedding (decoder) layer, captured with a forward hook, so the architecture's own
    head transform (dense + activation + LayerNorm) is applied exactly as in pretraining."""

    def __init__(self, model: nn.Module, tokenizer, max_len: int = 256):
        super().__init__()
        if model.get_output_embeddings() is None:
            raise PromptError(f"{type(model).__name__} has no MLM head: use AutoModelForMaskedLM")
        if tokenizer.mask_token_id is None:
            raise PromptError("the tokenizer has no mask token")
        self.model, self.tokenizer = model, tokenizer
        self.max_len = min(max_len, getattr(model.config, "max_position_embeddings", max_len))
        self._captured: list[torch.Tensor] = []
        # a bound method (not a closure), so that a deep copy hooks into its own copy
        model.get_output_embeddings().register_forward_hook(self._capture)

    def _capture(self, _module: nn.Module, inputs: tuple, _output: torch.Tensor) -> None:
        self._captured.append(inputs[0])

    @classmethod
    def from_pretrained(cls, name: str, max_len: int = 256) -> HFMaskedLM:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        try:
            return cls(AutoModelForMaskedLM.from_pretrained(name),
                       AutoTokenizer.from_pretrained(name), max_len)
        except OSError as err:
            raise PromptError(
                f"could not load the masked LM {name!r} (Hub or cache). Go online (e.g. Colab) "
                "or use our MLM: prompting.load_mlm('ours', scale)."
            ) from err

    def input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.model.set_input_embeddings(module)

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.model.get_output_embeddings().weight

    @property
    def decoder_bias(self) -> torch.Tensor | None:
        return getattr(self.model.get_output_embeddings(), "bias", None)

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self._captured.clear()
        self.model(input_ids=input_ids, attention_mask=attention_mask)
        return self._captured.pop()

    def special_wrap(self) -> tuple[list[int], list[int]]:
        # where the tokenizer puts its special tokens around a probe word
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("a")["input_ids"]
        at = next(i for i in range(len(full)) if full[i: i + len(plain)] == plain)
        return full[:at], full[at + len(plain):]


def load_mlm(name: str = "ours", scale=None) -> MaskedLM:
    """``"ours"``: the scale's MLM from notebook 01 (pretrained now if not cached); else a Hub id."""
    if name == "ours":
        from .pretraining import load_or_pretrain

        if scale is None:
            raise PromptError("load_mlm('ours') needs the scale")
        result = load_or_pretrain(scale, "mlm")
        return OurMaskedLM(result.model, result.tokenizer)
    return HFMaskedLM.from_pretrained(name)


# --- templates and verbalizers -------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A cloze template: ``<x>`` is the input text, ``[MASK]`` (exactly once) the answer slot."""

    text: str

    def __post_init__(self) -> None:
        if self.text.count(MASK) != 1:
            raise PromptError(f"a template needs exactly one {MASK}, got {self.text!r}")
        if self.text.count(TEXT) != 1:
            raise PromptError(f"a template needs exactly one {TEXT} for the input, got {self.text!r}")

    def parts(self) -> list[str]:
        """``"<x> It was [MASK] ."`` → ``["<x>", "It was", "[MASK]", "."]``."""
        return [p.strip() for p in re.split(r"(<x>|\[MASK\])", self.text) if p.strip()]

    def literal_ids(self, mlm: MaskedLM) -> list[list[int]]:
        """Word-piece ids of each literal part, in order (no leading space at the very start)."""
        return [mlm.piece_ids(p, first=i == 0) for i, p in enumerate(self.parts())
                if p not in (TEXT, MASK)]


def verbalizer_ids(mlm: MaskedLM, verbalizer: Mapping[str, str], label_names: Sequence[str]
                   ) -> list[int]:
    """One vocabulary id per label, in label order; a clear error for a missing label or a word
    that is not a single token of the backbone's vocabulary."""
    missing = [n for n in label_names if n not in verbalizer]
    if missing:
        raise PromptError(f"the verbalizer has no word for label(s) {missing}: it maps "
                          f"{dict(verbalizer)}; give one word for each of {list(label_names)}")
    ids = []
    for name in label_names:
        pieces = mlm.piece_ids(verbalizer[name])
        if len(pieces) != 1 or pieces[0] == mlm.tokenizer.unk_token_id:
            raise PromptError(
                f"label word {verbalizer[name]!r} (label {name!r}) is {len(pieces)} word pieces "
                f"{mlm.tokenizer.convert_ids_to_tokens(pieces)} in this vocabulary; a label word "
                "must be one token (see choose_verbalizer)")
        ids.append(pieces[0])
    return ids


def _single_token(mlm: MaskedLM, word: str) -> bool:
    pieces = mlm.piece_ids(word)
    return len(pieces) == 1 and pieces[0] != mlm.tokenizer.unk_token_id


def choose_verbalizer(mlm: MaskedLM, candidates: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """For each label the first candidate word that is a single token of ``mlm``'s vocabulary."""
    out = {}
    for label, words in candidates.items():
        good = [w for w in words if _single_token(mlm, w)]
        if not good:
            raise PromptError(f"none of {list(words)} (label {label!r}) is a single token here")
        out[label] = good[0]
    return out


def encode_prompts(
    mlm: MaskedLM,
    template: Template,
    rows: Sequence[Mapping],
    template_ids: Sequence[int] | None = None,
    max_len: int | None = None,
) -> list[dict]:
    """Token ids of each row wrapped in ``template``, with the [MASK] position and a mask of the
    input-text tokens (the only ones the fluency constraint may mask). ``template_ids`` replaces
    the template's own word pieces (DART's pseudo tokens); the text is truncated to fit."""
    max_len = max_len or mlm.max_len
    parts = template.parts()
    literal = template.literal_ids(mlm)
    n_template = sum(map(len, literal))
    if template_ids is not None and len(template_ids) != n_template:
        raise PromptError(f"{len(template_ids)} template ids for {n_template} template pieces")
    pseudo = list(template_ids) if template_ids is not None else None
    texts = [r["text"] for r in rows]
    first = parts[0] == TEXT
    text_ids = mlm.tokenizer([t if first else " " + t.strip() for t in texts],
                             add_special_tokens=False)["input_ids"]
    before, after = mlm.special_wrap()
    budget = max_len - len(before) - len(after) - n_template - 1
    if budget < 1:
        raise PromptError(f"max_len={max_len} leaves no room for the text")
    out = []
    for row, x in zip(rows, text_ids):
        ids, kind = list(before), [0] * len(before)  # kinds: 0 special, 1 text, 2 template, 3 mask
        lit = iter(literal)
        k = 0
        for p in parts:
            if p == TEXT:
                ids += x[:budget]
                kind += [1] * len(x[:budget])
            elif p == MASK:
                ids.append(mlm.mask_id)
                kind.append(3)
            else:
                pieces = next(lit)
                ids += pseudo[k: k + len(pieces)] if pseudo is not None else pieces
                kind += [2] * len(pieces)
                k += len(pieces)
        ids += after
        kind += [0] * len(after)
        out.append({"input_ids": ids, "mask_pos": kind.index(3),
                    "text_mask": [int(c == 1) for c in kind], "labels": int(row["label"])})
    return out


def prompt_collate(pad_id: int) -> Callable[[list[dict]], dict[str, torch.Tensor]]:
    """Right-padded ``input_ids``, ``attention_mask``, ``text_mask``, ``mask_pos``, ``labels``."""
    base = pad_collate(pad_id)

    def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = base([{"input_ids": r["input_ids"], "labels": r["labels"]} for r in rows])
        text = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
        for i, r in enumerate(rows):
            text[i, : len(r["text_mask"])] = torch.as_tensor(r["text_mask"], dtype=torch.bool)
        batch["text_mask"] = text
        batch["mask_pos"] = torch.as_tensor([r["mask_pos"] for r in rows])
        return batch

    return collate


class PromptClassifier(nn.Module):
    """Manual prompt (LM-BFF "prompt-based fine-tuning"): the MLM's logits of the label words at
    [MASK]. All of the backbone trains; no parameter is added."""

    def __init__(self, mlm: MaskedLM, template: str | Template, label_ids: Sequence[int]):
        super().__init__()
        self.mlm = mlm
        self.template = template if isinstance(template, Template) else Template(template)
        self.register_buffer("label_ids", torch.as_tensor(list(label_ids)), persistent=False)

    @property
    def num_labels(self) -> int:
        return len(self.label_ids)

    def encode(self, rows: Sequence[Mapping], max_len: int | None = None) -> list[dict]:
        return encode_prompts(self.mlm, self.template, rows, max_len=max_len)

    def label_scores(self, h: torch.Tensor) -> torch.Tensor:
        """[B, D] features at [MASK] → [B, C] class logits."""
        w = self.mlm.decoder_weight[self.label_ids]
        logits = h @ w.T.to(h.dtype)
        bias = self.mlm.decoder_bias
        return logits if bias is None else logits + bias[self.label_ids].to(h.dtype)

    def mask_features(self, input_ids, attention_mask, mask_pos) -> torch.Tensor:
        h = self.mlm.features(input_ids, attention_mask)
        return h[torch.arange(h.size(0), device=h.device), mask_pos]

    def forward(self, input_ids, attention_mask, mask_pos, text_mask=None, labels=None) -> Output:
        logits = self.label_scores(self.mask_features(input_ids, attention_mask, mask_pos))
        loss = None if labels is None else F.cross_entropy(logits.float(), labels)
        return Output(logits, loss)


# --- the few-shot loop ---------------------------------------------------------------------------


@dataclass
class Built:
    """What a method needs to be trained: the model, its encoded splits and its optimiser groups."""

    model: nn.Module
    encode: Callable[[Sequence[Mapping]], list[dict]]
    collate: Callable
    param_groups: Callable[[float, float], list[dict]] | None = None  # (lr, wd) → groups


def decay_groups(model: nn.Module, weight_decay: float, exclude: Sequence[nn.Parameter] = ()
                 ) -> list[dict]:
    """AdamW groups as in pretraining: no decay on biases, LayerNorms and embeddings."""
    skip = {id(p) for p in exclude}
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in skip or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.dim() < 2 or "emb" in name else decay).append(p)
    return [g for g in ({"params": decay, "weight_decay": weight_decay},
                        {"params": no_decay, "weight_decay": 0.0}) if g["params"]]


@dataclass
class FewShotRun:
    test: dict
    dev_accuracy: float
    best_step: int
    lr: float
    seconds: float
    history: list[dict] = field(default_factory=list)
    built: Built | None = None

    @property
    def model(self) -> nn.Module | None:
        return self.built.model if self.built else None


def train_fewshot(
    build: Callable[[], Built],
    split: FewShotSplit,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    eval_every: int,
    seed: int = 0,
    weight_decay: float = 0.01,
    max_norm: float = 1.0,
    warmup_frac: float = 0.1,
    eval_batch_size: int = 128,
    evaluate_test: bool = True,
) -> FewShotRun:
    """Train ``steps`` AdamW steps on ``split.train``; every ``eval_every`` steps score the few-shot
    dev set and keep the best checkpoint (accuracy, then lower loss); test that checkpoint once."""
    split.require("train", "dev", *(("test",) if evaluate_test else ()))
    seed_everything(seed)
    built = build()
    model, dev, amp = built.model, device(), autocast_dtype()
    model.to(dev)
    groups = (built.param_groups(lr, weight_decay) if built.param_groups
              else decay_groups(model, weight_decay))
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
    gen = torch.Generator().manual_seed(seed)
    train_rows = built.encode(split.train)
    loader = DataLoader(train_rows, batch_size=min(batch_size, len(train_rows)), shuffle=True,
                        collate_fn=built.collate, generator=gen, drop_last=True)
    dev_loader = DataLoader(built.encode(split.dev), batch_size=eval_batch_size,
                            collate_fn=built.collate)
    trainer = create_trainer(model, optimizer, device=dev, amp_dtype=amp, max_norm=max_norm)
    attach_schedule(trainer, optimizer, kind="linear", lr=lr, warmup=int(warmup_frac * steps),
                    total=steps)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=split.num_labels,
                                            amp_dtype=amp)
    best = {"key": (-1.0, 0.0), "step": 0, "state": None}
    history: list[dict] = []

    def _state() -> dict:
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    @trainer.on(Events.ITERATION_COMPLETED(every=eval_every) | Events.COMPLETED)
    def _dev(engine) -> None:
        step = engine.state.iteration
        if history and history[-1]["step"] == step:
            return
        m = evaluator.run(dev_loader).metrics
        history.append({"step": step, "dev_accuracy": m["accuracy"], "dev_loss": m["loss"],
                        "train_loss": engine.state.output})
        if (m["accuracy"], -m["loss"]) > best["key"]:
            best.update(key=(m["accuracy"], -m["loss"]), step=step, state=_state())

    @trainer.on(Events.ITERATION_COMPLETED(once=steps))
    def _stop(engine) -> None:
        _dev(engine)
        engine.terminate()

    start = time.perf_counter()
    trainer.run(loader, max_epochs=math.ceil(steps / len(loader)))
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    test = {}
    if evaluate_test:
        test_loader = DataLoader(built.encode(split.test), batch_size=eval_batch_size,
                                 collate_fn=built.collate)
        test = dict(evaluator.run(test_loader).metrics)
    return FewShotRun(test, best["key"][0], best["step"], lr, time.perf_counter() - start,
                      history, built)


def select_and_test(build: Callable[[], Built], split: FewShotSplit, lrs: Sequence[float],
                    **kwargs) -> FewShotRun:
    """LM-BFF's per-split grid search, on the few-shot **dev** set only: train once per learning
    rate, keep the best dev accuracy, and evaluate *only that* model on test."""
    runs = [train_fewshot(build, split, lr=lr, evaluate_test=False, **kwargs) for lr in lrs]
    winner = max(runs, key=lambda r: r.dev_accuracy)  # first best on ties
    built = winner.built
    evaluator = create_classifier_evaluator(built.model, device=device(),
                                            num_labels=split.num_labels,
                                            amp_dtype=autocast_dtype())
    loader = DataLoader(built.encode(split.test), batch_size=kwargs.get("eval_batch_size", 128),
                        collate_fn=built.collate)
    winner.test = dict(evaluator.run(loader).metrics)
    winner.seconds = sum(r.seconds for r in runs)
    return winner


# --- the three methods of notebook 09 ------------------------------------------------------------


def cls_method(backbone: str, scale) -> Callable[[FewShotSplit], Callable[[], Built]]:
    """[CLS]-head fine-tuning through ``finetuning.make_backbone`` (our MLM: "pretrained-mlm")."""
    from .finetuning import make_backbone

    def for_split(split: FewShotSplit) -> Callable[[], Built]:
        def build() -> Built:
            b = make_backbone(backbone, scale, split.num_labels)

            def encode(rows):
                ids = b.encode([r["text"] for r in rows])
                return [{"input_ids": i, "labels": int(r["label"])} for i, r in zip(ids, rows)]

            return Built(b.model, encode, pad_collate(b.pad_id))

        return build

    return for_split


def prompt_method(
    mlm: MaskedLM | Callable[[], MaskedLM],
    templates: Mapping[str, str],
    verbalizers: Mapping[str, Mapping[str, str]],
    max_len: int | None = None,
) -> Callable[[FewShotSplit], Callable[[], Built]]:
    """Manual-prompt fine-tuning; each run starts from a fresh copy of ``mlm``."""

    def for_split(split: FewShotSplit) -> Callable[[], Built]:
        def build() -> Built:
            lm = fresh(mlm)
            ids = verbalizer_ids(lm, verbalizers[split.task], split.label_names)
            model = PromptClassifier(lm, templates[split.task], ids)
            return Built(model, lambda rows: model.encode(rows, max_len), prompt_collate(lm.pad_id))

        return build

    return for_split


def fresh(mlm: MaskedLM | Callable[[], MaskedLM]) -> MaskedLM:
    """A private copy of a masked LM (or a new one from a factory), so runs never share weights."""
    return copy.deepcopy(mlm) if isinstance(mlm, nn.Module) else mlm()


def compare_fewshot(
    methods: Mapping[str, Callable[[FewShotSplit], Callable[[], Built]]],
    splits: Sequence[FewShotSplit],
    *,
    lrs: Mapping[str, Sequence[float]],
    keep: Callable[[str, FewShotSplit], bool] | None = None,
    progress: Callable[[str], None] | None = None,
    **train_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """Every method on every split (grid over ``lrs[method]`` chosen on dev); one row per run.
    ``keep(method, split)`` marks runs whose trained model is returned in the second value."""
    rows, kept = [], {}
    for split in splits:
        for name, method in methods.items():
            run = select_and_test(method(split), split, lrs[name], **train_kwargs)
            rows.append({"task": split.task, "K": split.k if split.k else "full",
                         "split": split.seed, "method": name,
                         "test_accuracy": run.test["accuracy"], "test_error": run.test["error"],
                         "dev_accuracy": run.dev_accuracy, "best_step": run.best_step,
                         "lr": run.lr, "seconds": run.seconds})
            if keep and keep(name, split):
                kept[(name, split.task, split.k, split.seed)] = run
            if progress:
                progress(f"{split.task} K={split.k} split {split.seed} {name}: "
                         f"test {100 * run.test['accuracy']:.1f}")
    return pd.DataFrame(rows), kept


def zero_shot(mlm: MaskedLM, split: FewShotSplit, template: str, verbalizer: Mapping[str, str],
              eval_batch_size: int = 128) -> dict:
    """Test metrics of the untrained prompt classifier (no training, nothing selected)."""
    model = PromptClassifier(mlm, template, verbalizer_ids(mlm, verbalizer, split.label_names))
    dev = device()
    model.to(dev)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=split.num_labels,
                                            amp_dtype=autocast_dtype())
    loader = DataLoader(model.encode(split.test), batch_size=eval_batch_size,
                        collate_fn=prompt_collate(mlm.pad_id))
    return dict(evaluator.run(loader).metrics)


def summarize(table: pd.DataFrame, by: Sequence[str] = ("task", "method")) -> pd.DataFrame:
    """Mean ± std (sample std over splits) of test accuracy in %, one cell per task and method."""
    g = table.groupby(list(by), sort=False)["test_accuracy"]
    stats = pd.DataFrame({"mean": 100 * g.mean(), "std": 100 * g.std(ddof=1).fillna(0.0),
                          "splits": g.count()})
    stats["accuracy % (mean ± std)"] = [f"{m:.1f} ± {s:.1f}" for m, s in
                                        zip(stats["mean"], stats["std"])]
    return stats


def verdicts(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per task, every method against ``baseline`` (``finetuning.compare_to_baseline`` on test
    error over the splits: within noise when |Δ| ≤ pooled std)."""
    from .finetuning import compare_to_baseline

    parts = []
    for task, g in table.groupby("task", sort=False):
        c = compare_to_baseline(g, baseline, by="method", column="test_error")
        c.insert(0, "task", task)
        parts.append(c.reset_index())
    return pd.concat(parts, ignore_index=True)


def verdict_lines(comparison: pd.DataFrame, baseline: str) -> str:
    """The :func:`verdicts` table as sentences, in points of test *accuracy* (Δ = −Δ error)."""
    words = {"lower error (beyond noise)": "better (beyond noise)",
             "higher error (beyond noise)": "worse (beyond noise)"}
    lines = []
    for _, r in comparison.iterrows():
        if r["method"] == baseline:
            continue
        lines.append(f"{r['task']}: {r['method']} {-r['Δ mean (points)']:+.1f} points of accuracy "
                     f"vs {baseline} (pooled std {r['pooled std (points)']:.1f}) → "
                     f"{words.get(r['verdict'], r['verdict'])}")
    return "\n".join(lines)


def beats(comparison: pd.DataFrame, method: str) -> list[str]:
    """The tasks on which ``method`` has lower test error than the baseline beyond noise."""
    rows = comparison[(comparison["method"] == method)
                      & (comparison["verdict"] == "lower error (beyond noise)")]
    return list(rows["task"])
