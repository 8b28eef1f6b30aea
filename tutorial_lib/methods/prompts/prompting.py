"""Prompt-based classification with a pretrained LM head (LM-BFF style), notebook 09.

A task becomes a cloze question: a **template** with one ``[MASK]`` wraps the input
(``"<x> It was [MASK] ."``) and a **verbalizer** maps each label to a word (negative → "terrible",
positive → "great"). The class scores are the LM's logits at the answer slot restricted to the
label words,

    p(y | x) = softmax_y( h_slot · e_{v(y)} + b_{v(y)} ),

so the classifier *is* the pretrained LM head: no new parameters (Schick & Schütze 2021,
Gao et al. 2021). Any :class:`~tutorial_lib.backbones.Backbone` with its LM head works:

* a **masked LM** (``answer_slot == "mask"``) reads the answer at a ``[MASK]`` token anywhere in
  the template: our MLM from notebook 01 (pretrained on WikiText lines ended by [SEP]) or any
  Hugging Face ``AutoModelForMaskedLM`` (e.g. ``roberta-large`` as in the paper);
* a **causal LM** (``answer_slot == "next"``, e.g. SmolLM2) reads it as the *next token*: ``[MASK]``
  must end the template, nothing is inserted there, and the hidden state of the last token before
  it scores the label words — the LM-BFF recipe for GPT-style models (P-tuning, Liu et al. 2021,
  did DART-style continuous templates on GPT-2). A causal template is tokenized as written, so
  its whitespace matters: the input text goes in with a leading space (``"Review:<x>\n…:[MASK]"``).

Loading them is in :mod:`.prompt_lms`. Manual-prompt fine-tuning trains
:class:`PromptClassifier`; DART (:mod:`.dart`) extends it; the few-shot loop that trains and
compares them is :mod:`.fewshot`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...backbones import Backbone
from ...models import Output
from ...training import pad_collate
from .prompt_lms import PromptError, freeze_below, fresh_copy, load_mlm, load_prompt_lm

# the language models live in .prompt_lms; they are part of this module's face for notebook 09
__all__ = ["PromptError", "freeze_below", "fresh_copy", "load_mlm", "load_prompt_lm", "MASK", "TEXT",
           "TEMPLATES", "CAUSAL_TEMPLATES",
           "VERBALIZER_CANDIDATES", "CAUSAL_VERBALIZER_CANDIDATES", "Template", "template_for",
           "verbalizer_candidates", "verbalizer_ids", "choose_verbalizer", "encode_prompts",
           "prompt_collate", "PromptClassifier"]

MASK, TEXT = "[MASK]", "<x>"

# LM-BFF's templates (single-sentence tasks) and candidate label words, best first: the first
# candidate that is a single token of the backbone's vocabulary is used (LM-BFF's own words —
# "terrible"/"great" — are not in our 8k WikiText vocabulary).
TEMPLATES = {"sst2": "<x> It was [MASK] .", "mr": "<x> It was [MASK] .",
             "cr": "<x> It was [MASK] .", "mpqa": "<x> It was [MASK] .",
             "sst5": "<x> It was [MASK] .", "subj": "<x> This is [MASK] .",
             "trec": "[MASK] : <x>", "cola": "<x> This is [MASK] ."}
# A causal LM answers after the prompt (the answer slot ends it) and reads whitespace as written;
# an instruction-tuned one does best when asked (measured on SST-2: see notebook 09).
CAUSAL_TEMPLATES = {
    "sst2": "Review:<x>\nSentiment (positive or negative):[MASK]",
    "mr": "Review:<x>\nSentiment (positive or negative):[MASK]",
    "cr": "Product review:<x>\nSentiment (positive or negative):[MASK]",
    "mpqa": "Phrase:<x>\nSentiment (positive or negative):[MASK]",
    "subj": "Sentence:<x>\nIs it subjective or objective?[MASK]",
    "trec": "Question:<x>\nThe answer is a (description, entity, abbreviation, human, location or "
            "number):[MASK]",
}
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
_ASKED = {"negative": ("negative",), "positive": ("positive",)}
CAUSAL_VERBALIZER_CANDIDATES: dict[str, dict[str, Sequence[str]]] = {
    "sst2": _ASKED, "mr": _ASKED, "cr": _ASKED, "mpqa": _ASKED,
    "subj": {"objective": ("objective",), "subjective": ("subjective",)},
    "trec": {"ABBR": ("abbreviation",), "ENTY": ("entity",), "DESC": ("description",),
             "HUM": ("human",), "LOC": ("location",), "NUM": ("number",)},
}


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

    def parts(self, raw: bool = False) -> list[str]:
        """``"<x> It was [MASK] ."`` → ``["<x>", "It was", "[MASK]", "."]``; ``raw``: keep the
        literal parts' whitespace (a causal LM's prompt is tokenized as written)."""
        pieces = re.split(r"(<x>|\[MASK\])", self.text)
        if raw:
            return [p for p in pieces if p]
        return [p.strip() for p in pieces if p.strip()]

    def literal_ids(self, lm: Backbone) -> list[list[int]]:
        """Token ids of each literal part, in order (see :meth:`Backbone.literal_ids`)."""
        parts = self.parts(raw=lm.answer_slot == "next")
        return [lm.literal_ids(p, first=i == 0) for i, p in enumerate(parts)
                if p not in (TEXT, MASK)]


def template_for(lm: Backbone, task: str) -> str:
    """The template of ``task`` for this kind of LM (causal: the answer slot ends the prompt)."""
    table = CAUSAL_TEMPLATES if lm.answer_slot == "next" else TEMPLATES
    if task not in table:
        raise PromptError(f"no template for task {task!r}: known {sorted(table)}; write one with "
                          f"{TEXT} for the input and {MASK} for the answer")
    return table[task]


def verbalizer_candidates(lm: Backbone, task: str) -> dict[str, Sequence[str]]:
    """Candidate label words of ``task`` for this kind of LM (see :func:`choose_verbalizer`)."""
    table = CAUSAL_VERBALIZER_CANDIDATES if lm.answer_slot == "next" else VERBALIZER_CANDIDATES
    if task not in table:
        raise PromptError(f"no label words for task {task!r}: known {sorted(table)}")
    return table[task]


def verbalizer_ids(lm: Backbone, verbalizer: Mapping[str, str], label_names: Sequence[str]
                   ) -> list[int]:
    """One vocabulary id per label, in label order; a clear error for a missing label or a word
    that is not a single token of the backbone's vocabulary."""
    missing = [n for n in label_names if n not in verbalizer]
    if missing:
        raise PromptError(f"the verbalizer has no word for label(s) {missing}: it maps "
                          f"{dict(verbalizer)}; give one word for each of {list(label_names)}")
    ids = []
    for name in label_names:
        pieces = lm.piece_ids(verbalizer[name])
        if len(pieces) != 1 or pieces[0] == lm.tokenizer.unk_token_id:
            raise PromptError(
                f"label word {verbalizer[name]!r} (label {name!r}) is {len(pieces)} word pieces "
                f"{lm.tokenizer.convert_ids_to_tokens(pieces)} in this vocabulary; a label word "
                "must be one token (see choose_verbalizer)")
        ids.append(pieces[0])
    return ids


def _single_token(lm: Backbone, word: str) -> bool:
    pieces = lm.piece_ids(word)
    return len(pieces) == 1 and pieces[0] != lm.tokenizer.unk_token_id


def choose_verbalizer(lm: Backbone, candidates: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """For each label the first candidate word that is a single token of ``lm``'s vocabulary."""
    out = {}
    for label, words in candidates.items():
        good = [w for w in words if _single_token(lm, w)]
        if not good:
            raise PromptError(f"none of {list(words)} (label {label!r}) is a single token here")
        out[label] = good[0]
    return out


def encode_prompts(
    lm: Backbone,
    template: Template,
    rows: Sequence[Mapping],
    template_ids: Sequence[int] | None = None,
    max_len: int | None = None,
) -> list[dict]:
    """Token ids of each row wrapped in ``template``, with the [MASK] position and a mask of the
    input-text tokens (the only ones the fluency constraint may mask). ``template_ids`` replaces
    the template's own word pieces (DART's pseudo tokens); the text is truncated to fit."""
    max_len = max_len or lm.max_len
    parts = template.parts(raw=lm.answer_slot == "next")
    if lm.answer_slot == "next" and parts[-1] != MASK:
        raise PromptError(f"a causal LM reads the answer as the next token: {MASK} must end the "
                          f"template, got {template.text!r}")
    literal = template.literal_ids(lm)
    n_template = sum(map(len, literal))
    if template_ids is not None and len(template_ids) != n_template:
        raise PromptError(f"{len(template_ids)} template ids for {n_template} template pieces")
    pseudo = list(template_ids) if template_ids is not None else None
    texts = [r["text"] for r in rows]
    first = parts[0] == TEXT
    text_ids = lm.tokenizer([t.strip() if first else " " + t.strip() for t in texts],
                             add_special_tokens=False)["input_ids"]
    before, after = lm.special_wrap()
    budget = max_len - len(before) - len(after) - n_template - (lm.answer_slot == "mask")
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
            elif p == MASK and lm.answer_slot == "next":  # the answer is the next token: read the last one
                mask_pos = len(ids) - 1
            elif p == MASK:
                ids.append(lm.mask_id)
                kind.append(3)
            else:
                pieces = next(lit)
                ids += pseudo[k: k + len(pieces)] if pseudo is not None else pieces
                kind += [2] * len(pieces)
                k += len(pieces)
        ids += after
        kind += [0] * len(after)
        if lm.answer_slot == "mask":
            mask_pos = kind.index(3)
        out.append({"input_ids": ids, "mask_pos": mask_pos,
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
    [MASK]. All of the backbone trains; no parameter is added, unless ``train_label_rows``: then
    the label words' output rows become parameters of their own (a copy, the same start)."""

    def __init__(self, lm: Backbone, template: str | Template, label_ids: Sequence[int],
                 train_label_rows: bool = False):
        super().__init__()
        self.backbone = lm  # the LM's interface (not a module) …
        self.lm = lm.lm  # … and its network, registered: its parameters train
        self.template = template if isinstance(template, Template) else Template(template)
        self.register_buffer("label_ids", torch.as_tensor(list(label_ids)), persistent=False)
        # the label words' output rows as their own parameters (same start): they train even
        # where the word embeddings (the tied LM head) are frozen; nothing else reads them
        self.label_rows = self.label_row_bias = None
        if train_label_rows:
            self.label_rows = nn.Parameter(lm.decoder_weight[self.label_ids].detach().clone())
            if lm.decoder_bias is not None:
                self.label_row_bias = nn.Parameter(
                    lm.decoder_bias[self.label_ids].detach().clone())

    @property
    def num_labels(self) -> int:
        return len(self.label_ids)

    def encode(self, rows: Sequence[Mapping], max_len: int | None = None) -> list[dict]:
        return encode_prompts(self.backbone, self.template, rows, max_len=max_len)

    def label_scores(self, h: torch.Tensor) -> torch.Tensor:
        """[B, D] features at [MASK] → [B, C] class logits."""
        w, bias = self.label_rows, self.label_row_bias
        if w is None:
            w, bias = self.backbone.decoder_weight[self.label_ids], self.backbone.decoder_bias
            bias = None if bias is None else bias[self.label_ids]
        logits = h @ w.T.to(h.dtype)
        return logits if bias is None else logits + bias.to(h.dtype)

    def mask_features(self, input_ids, attention_mask, mask_pos) -> torch.Tensor:
        h = self.backbone.features(input_ids, attention_mask)
        return h[torch.arange(h.size(0), device=h.device), mask_pos]

    def forward(self, input_ids, attention_mask, mask_pos, text_mask=None, labels=None) -> Output:
        logits = self.label_scores(self.mask_features(input_ids, attention_mask, mask_pos))
        loss = None if labels is None else F.cross_entropy(logits.float(), labels)
        return Output(logits, loss)

