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
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from seqeval.metrics import classification_report
from seqeval.scheme import IOB2
from transformers import BatchEncoding, PreTrainedTokenizerBase

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
