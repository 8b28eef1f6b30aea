"""Token classification (named entities, CoNLL-2003): word tags on sub-word pieces, and back.

A NER corpus labels **words**; a WordPiece model sees **pieces** (``Blackburn`` → ``black``,
``##burn``). Fine-tuning needs one label per piece, and scoring needs one tag per word again:

* :func:`align_labels` puts each word's tag on its **first piece** and ``-100`` (ignored by
  ``cross_entropy``) on the rest and on the special tokens, as BERT did for CoNLL-2003 (Devlin et
  al. 2019, §5.3); ``all_pieces=True`` labels every piece instead (a continuation piece of a
  ``B-X`` word gets ``I-X``);
* :func:`word_tags` reads a word's prediction off its first piece, so that the labels of
  :func:`align_labels` give back the gold tags exactly (the round trip the tests run on every
  sentence of the corpus);
* :func:`entity_scores` is the community's scorer, ``seqeval``, in **strict IOB2** mode: an entity
  counts only if its type and both boundaries are right (CoNLL's own ``conlleval`` definition);
  :func:`entity_spans` is the same definition written out, which the tests check against it.

Floors every NER table states: the all-``O`` tagger (entity F1 = 0: it predicts no entity) and
:class:`MajorityTagger`, each word's most frequent training tag.

The model, :class:`TokenClassifier`, is any backbone's encoder with a linear layer on every
position; :func:`finetune_ner` trains it with the one recipe (:func:`tutorial_lib.training.fit`)
and scores the test sentences word by word (:func:`predict_tags`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from seqeval.metrics import classification_report
from seqeval.scheme import IOB2
from torch import nn
from transformers import BatchEncoding, PreTrainedTokenizerBase

from ... import data
from ...backbones import Backbone
from ...config import Scale
from ...finetuning import Recipe, Run, Scored, run
from ...models import EncoderHead, Output
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...training import (
    PLAIN,
    Method,
    pad_ids,
)

IGNORE = -100
"""The label of positions the loss skips (``torch.nn.functional.cross_entropy``'s ``ignore_index``)."""

Tags = list[str]

# --------------------------------------------------------------------------- tag schemes


def iob1_to_iob2(tags: Sequence[str]) -> Tags:
    """IOB1 (``I-X`` opens an entity; ``B-X`` only between two adjacent ``X`` entities) to IOB2
    (every entity opens with ``B-X``): an ``I-X`` that does not continue an ``X`` becomes ``B-X``.

    Applied to *predicted* tags it is also the usual repair of an invalid IOB2 sequence (an ``I-X``
    after ``O`` or after another type starts an entity instead of being dropped).
    """
    out: Tags = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (i == 0 or tags[i - 1] == "O" or tags[i - 1][2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


def continuation_ids(names: Sequence[str]) -> list[int]:
    """For each tag id, the id a word's later pieces get in all-pieces labelling (``B-X`` → ``I-X``)."""
    index = {name: i for i, name in enumerate(names)}
    return [index.get("I-" + n[2:], i) if n.startswith("B-") else i for i, n in enumerate(names)]


# ---------------------------------------------------------------------- words ↔ pieces


def align_labels(
    word_ids: Sequence[int | None],
    word_labels: Sequence[int],
    *,
    all_pieces: bool = False,
    continuation: Sequence[int] | None = None,
) -> list[int]:
    """One label per piece from one label per word.

    ``word_ids[i]`` is the word piece ``i`` came from (``None`` for [CLS], [SEP], padding), as the
    fast tokenizer's ``BatchEncoding.word_ids(k)`` gives it. The first piece of a word gets the
    word's label; later pieces get ``IGNORE`` or, with ``all_pieces``, ``continuation[label]``
    (the label itself when ``continuation`` is None); special tokens always get ``IGNORE``.
    """
    out, previous = [], None
    for word in word_ids:
        if word is None:
            out.append(IGNORE)
        elif word != previous:
            out.append(int(word_labels[word]))
        elif all_pieces:
            label = int(word_labels[word])
            out.append(continuation[label] if continuation is not None else label)
        else:
            out.append(IGNORE)
        previous = word
    return out


def word_tags(word_ids: Sequence[int | None], piece_values: Sequence[int], n_words: int,
              missing: int = 0) -> list[int]:
    """One value per word from one per piece: each word's **first** piece decides.

    Words with no piece (cut off by truncation) get ``missing`` (the id of ``O``).
    """
    out = [missing] * n_words
    seen: set[int] = set()
    for word, value in zip(word_ids, piece_values):
        if word is not None and word not in seen:
            seen.add(word)
            out[word] = int(value)
    return out


def tokenize_and_align(
    tokenizer: PreTrainedTokenizerBase,
    tokens: Sequence[Sequence[str]],
    tags: Sequence[Sequence[int]] | None = None,
    *,
    max_length: int | None = None,
    all_pieces: bool = False,
    names: Sequence[str] | None = None,
) -> BatchEncoding:
    """Tokenize pre-split sentences in one batched call (fast tokenizer) and add ``labels``.

    ``tokens`` are lists of words; ``tags`` their label ids (None: no labels). Sentences longer
    than ``max_length`` pieces are truncated (None: never); the words cut off are scored as ``O``
    by :func:`word_tags`. ``names`` (the tag names) give the ``B-X`` → ``I-X`` map of all-pieces
    labelling. The result keeps ``word_ids`` (one list per sentence) for :func:`word_tags`.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("word alignment needs a fast tokenizer (word_ids); load it with use_fast=True")
    enc = tokenizer([list(t) for t in tokens], is_split_into_words=True,
                    truncation=max_length is not None, max_length=max_length)
    word_ids = [enc.word_ids(k) for k in range(len(tokens))]
    enc["word_ids"] = word_ids
    if tags is not None:
        continuation = continuation_ids(names) if names is not None else None
        enc["labels"] = [align_labels(w, t, all_pieces=all_pieces, continuation=continuation)
                         for w, t in zip(word_ids, tags)]
    return enc


def check_tags(
    tokenizer: PreTrainedTokenizerBase,
    tokens: Sequence[Sequence[str]],
    tags: Sequence[Sequence[int]],
    *,
    max_length: int | None = None,
    all_pieces: bool = False,
    names: Sequence[str] | None = None,
) -> dict[str, int]:
    """Word tags → piece labels (:func:`tokenize_and_align`) → word tags (:func:`word_tags`):
    counts of ``words``, ``changed`` words (tag not recovered), ``truncated`` words (no piece
    left after truncation) and ``pieceless`` words (no piece at all, e.g. a lone control
    character), over all sentences."""
    enc = tokenize_and_align(tokenizer, tokens, tags, max_length=max_length, all_pieces=all_pieces,
                             names=names)
    counts = {"words": 0, "changed": 0, "truncated": 0, "pieceless": 0}
    untruncated = (tokenize_and_align(tokenizer, tokens)["word_ids"] if max_length is not None
                   else enc["word_ids"])
    for word_ids, labels, full_ids, gold in zip(enc["word_ids"], enc["labels"], untruncated, tags):
        back = word_tags(word_ids, labels, len(gold), missing=IGNORE)
        kept, present = set(word_ids) - {None}, set(full_ids) - {None}
        counts["words"] += len(gold)
        counts["pieceless"] += len(gold) - len(present)
        counts["truncated"] += len(present - kept)
        counts["changed"] += sum(b != int(g) for w, (b, g) in enumerate(zip(back, gold)) if w in kept)
    return counts


# ---------------------------------------------------------------------------- scoring


def entity_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities of one strict-IOB2 sentence as ``(type, first word, last word)``.

    An entity is a ``B-X`` followed by any ``I-X``; an ``I-X`` that continues no ``B-X`` / ``I-X``
    of its type opens nothing (strict mode: invalid pieces are not entities).
    """
    spans, start, kind = set(), None, None
    for i, tag in enumerate([*tags, "O"]):
        if start is not None and not (tag.startswith("I-") and tag[2:] == kind):
            spans.add((kind, start, i - 1))
            start = kind = None
        if tag.startswith("B-"):
            start, kind = i, tag[2:]
    return spans


def entity_f1_by_hand(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision / recall / F1 over entities, from :func:`entity_spans` (the definition;
    :func:`entity_scores` is the library)."""
    g = [(k, *s) for k, tags in enumerate(gold) for s in entity_spans(tags)]
    p = [(k, *s) for k, tags in enumerate(pred) for s in entity_spans(tags)]
    hit = len(set(g) & set(p))
    precision = hit / len(p) if p else 0.0
    recall = hit / len(g) if g else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Entity-level scores with ``seqeval`` (strict IOB2): micro ``precision``, ``recall``, ``f1``
    (fractions) and ``per_type`` = {type: {precision, recall, f1, support}}."""
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("gold and predicted tags must have the same sentences and lengths")
    report = classification_report([list(g) for g in gold], [list(p) for p in pred], mode="strict",
                                   scheme=IOB2, output_dict=True, zero_division=0)
    micro = report["micro avg"]
    per_type = {k: {m: float(v[m]) for m in ("precision", "recall", "f1-score", "support")}
                for k, v in report.items() if not k.endswith(" avg")}
    for scores in per_type.values():
        scores["f1"] = scores.pop("f1-score")
    return {"precision": float(micro["precision"]), "recall": float(micro["recall"]),
            "f1": float(micro["f1-score"]), "per_type": per_type}


# --------------------------------------------------------------------------- baselines


def all_o_tagger(sentences: Sequence[Sequence[str]]) -> list[Tags]:
    """The floor: ``O`` for every word (no entity, so entity precision, recall and F1 are 0)."""
    return [["O"] * len(s) for s in sentences]


@dataclass
class MajorityTagger:
    """Each word's most frequent tag in the training data (ties: the tag seen first); unseen
    words get ``O``. Strict IOB2 scoring drops an entity that opens with ``I-X`` (``Blackburn``
    alone is mostly ``I-PER``); ``repair=True`` reads such an ``I-X`` as ``B-X``
    (:func:`iob1_to_iob2`) instead."""

    repair: bool = False
    table: dict[str, str] = field(default_factory=dict)

    def fit(self, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]]) -> MajorityTagger:
        counts: dict[str, Counter] = defaultdict(Counter)
        for words, word_tags_ in zip(sentences, tags):
            for w, t in zip(words, word_tags_):
                counts[w][t] += 1
        self.table = {w: c.most_common(1)[0][0] for w, c in counts.items()}
        return self

    def predict(self, sentences: Sequence[Sequence[str]]) -> list[Tags]:
        out = [[self.table.get(w, "O") for w in words] for words in sentences]
        return [iob1_to_iob2(t) for t in out] if self.repair else out


# ----------------------------------------------------------------- the model and one run


class TokenClassifier(EncoderHead):
    """The head family's linear layer on **every** position: logits ``[B, T, C]``; with
    ``labels`` ``[B, T]``, the cross-entropy over the positions whose label is not ``IGNORE``."""

    def __init__(self, encoder: nn.Module, num_labels: int, dropout: float = 0.1):
        super().__init__(encoder, num_labels, dropout)
        self.num_labels = num_labels

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor | None = None) -> Output:
        logits = self.head(self.dropout(self.hidden(input_ids, attention_mask)))
        if labels is None:
            return Output(logits)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE)
        return Output(logits, loss)


@torch.no_grad()
def position_logits(model: nn.Module, rows: Sequence[Sequence[int]], pad_id: int,
                    batch_size: int = 128) -> list[torch.Tensor]:
    """The model's logits for every position of every row of token ids (``[len(row), C]`` each,
    float32, in the rows' order), batched shortest first under the machine's autocast."""
    dev = device()
    amp = autocast_dtype(dev)
    model.to(dev).eval()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out: list[torch.Tensor] = [torch.empty(0)] * len(rows)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        ids, mask = pad_ids([rows[i] for i in chunk], pad_id)
        with autocast(dev, amp):
            logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev)).logits
        for k, i in enumerate(chunk):
            out[i] = logits[k, :len(rows[i])].float().cpu()
    return out


def predict_tags(model: TokenClassifier, backbone: Backbone, tokens: Sequence[Sequence[str]],
                 names: Sequence[str], max_len: int, batch_size: int = 128) -> list[Tags]:
    """Tag names for every word of ``tokens``: the argmax at each word's first piece
    (:func:`word_tags`; words cut off by ``max_len`` get ``O``)."""
    enc = tokenize_and_align(backbone.tokenizer, tokens, max_length=max_len)
    logits = position_logits(model, enc["input_ids"], backbone.pad_id, batch_size)
    return [[names[t] for t in word_tags(w, lg.argmax(-1).tolist(), len(words))]
            for words, w, lg in zip(tokens, enc["word_ids"], logits)]


def ner_columns(scores: dict) -> dict:
    """The columns a NER run's table row shows: entity F1, precision, recall, F1 per type."""
    per_type = {f"F1 {k}": v["f1"] for k, v in sorted(scores["per_type"].items())}
    return {"f1": scores["f1"], "precision": scores["precision"], "recall": scores["recall"],
            **per_type}


def evals_per_epoch(budget: Budget, evals: int) -> int:
    """How often per pass to score a dev set so that a run of ``budget.epochs`` passes scores it
    about ``evals`` times (at least once a pass): one number of curve points for runs of 2 and of
    4 epochs."""
    return max(1, round(evals / budget.epochs))


def finetune_ner(backbone_name: str, train: dict, test: dict, names: Sequence[str], budget: Budget,
                 seed: int, *, scale: Scale, all_pieces: bool = False,
                 method: Method = PLAIN, dev: dict | None = None, dev_evals: int = 4) -> Run:
    """Fine-tune ``backbone_name`` + :class:`TokenClassifier` on ``train`` (``tokens``,
    ``ner_tags`` ids) with the one runner (:func:`~tutorial_lib.finetuning.run`), then
    score ``test`` with seqeval (strict IOB2): ``run.test`` holds :func:`entity_scores`,
    ``run.predictions`` the tags. ``dev`` (same columns): scored about ``dev_evals`` times during
    training (:func:`evals_per_epoch`), the :func:`ner_columns` in ``run.history.evals`` (each with
    its ``epoch``): the dev curve. Scoring reads the model only (no random numbers drawn), so the
    run trains exactly as without it.

    Hugging Face backbones keep their word embeddings frozen, as every classifier here does
    (:meth:`Backbone.classifier`). Inputs are cut at ``budget.max_len`` pieces (None: the
    backbone's limit). ``method`` changes the recipe as everywhere (e.g. ``prepare`` freezes the
    encoder: a linear probe on frozen features).
    """
    def build(bb: Backbone) -> TokenClassifier:
        bb.freeze_word_embeddings()
        return TokenClassifier(bb.encoder, len(names))

    def rows(bb: Backbone) -> list[dict]:
        enc = tokenize_and_align(bb.tokenizer, data.column(train, "tokens"), data.column(train, "ner_tags"),
                                 max_length=max_len(bb), all_pieces=all_pieces, names=names)
        return [{"input_ids": i, "labels": y} for i, y in zip(enc["input_ids"], enc["labels"])]

    def score(model: nn.Module, bb: Backbone) -> Scored:
        tokens = data.column(test, "tokens")
        pred = predict_tags(model, bb, tokens, names, max_len(bb), budget.eval_batch_size)
        scores = entity_scores([[names[t] for t in tags] for tags in data.column(test, "ner_tags")], pred)
        return Scored(scores, ner_columns(scores), pred)

    def validate(bb: Backbone) -> Callable[[nn.Module], dict]:
        gold = [[names[t] for t in tags] for tags in data.column(dev, "ner_tags")]
        return lambda model: ner_columns(entity_scores(gold, predict_tags(
            model, bb, data.column(dev, "tokens"), names, max_len(bb), budget.eval_batch_size)))

    def max_len(bb: Backbone) -> int:
        return min(budget.max_len or bb.max_len, bb.max_len)

    return run(Recipe(build=build, backbone=backbone_name, budget=budget, method=method,
                      rows=rows, score=score,
                      validate=validate if dev is not None and len(dev["tokens"]) else None,
                      evals_per_epoch=evals_per_epoch(budget, dev_evals)), seed, scale=scale)
