"""Extractive question answering (SQuAD v1.1): answer spans as token positions, and back.

The model reads ``[CLS] question [SEP] context [SEP]`` and scores every context token twice: as the
answer's **start** and as its **end** (Devlin et al. 2019, §4.2). Around that:

* :func:`windows` — a context longer than the model's input is cut into overlapping windows of
  ``max_length`` tokens, each with the whole question, consecutive windows sharing ``stride``
  tokens, so every answer lies whole inside some window;
* :func:`char_to_token_span` — the answer's character span → its first and last token, through the
  fast tokenizer's offset mapping (``None`` when this window does not hold it all);
  :func:`span_text` maps token positions back to the context's characters;
* :func:`best_span` / :func:`decode` — the prediction is the span with the highest
  ``start_logit[s] + end_logit[e]`` over ``s ≤ e < s + L`` (``L = max_answer_tokens``) within the
  context, the best over all windows of the question;
* :func:`exact_match` and :func:`f1`, SQuAD's official metrics, written from their definition
  (``evaluate-v1.1.py``): both compare :func:`normalize_answer` forms (lower case, punctuation
  and the articles a/an/the removed, whitespace collapsed); F1 is over bags of tokens; a
  question scores its best over the reference answers.

Baselines that read no model: :func:`random_span_baseline` (chance: a span of a typical answer's
length at a random place, the floor a trained model must beat; :func:`chance_scores` averages
draws of it at one seed, so chance pairs with the trained runs by seed), :func:`first_sentence_baseline`
and :func:`overlap_sentence_baseline` (the context sentence sharing most words with the question).

The model, :class:`SpanExtractor`, is any backbone's encoder with a linear layer giving every
position a start and an end score; :func:`finetune_qa` trains it on windows with the one recipe
(:func:`tutorial_lib.training.fit`) and decodes the test questions' answers.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedTokenizerBase

from ... import data
from ...backbones import Backbone
from ...config import Scale
from ...finetuning import Recipe, Run, Scored, run
from ...models import EncoderHead, Output
from ...settings import Budget
from ...training import PLAIN, Method
from .token_tasks import evals_per_epoch, position_logits

Offsets = list[tuple[int, int] | None]  # per token: its characters in the context, None outside it
ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = frozenset(string.punctuation)

# ----------------------------------------------------------------------------- windows


def windows(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    contexts: Sequence[str],
    answers: Sequence[dict[str, list]] | None = None,
    *,
    max_length: int = 384,
    stride: int = 128,
    indices: Sequence[int] | None = None,
) -> dict[str, list[Any]]:
    """Question + context windows for a batch of questions, in one fast-tokenizer call.

    Returns lists with one entry per window: ``input_ids``, ``attention_mask`` (and
    ``token_type_ids`` when the tokenizer makes them), ``offsets`` (per token its character span
    in the context, ``None`` for question and special tokens), ``example`` (the index of its
    question in the batch) and, given ``answers`` (SQuAD's ``{"text": [...], "answer_start":
    [...]}``), ``start_positions`` / ``end_positions`` of the first answer, or 0 / 0 (the [CLS]
    token) when that window does not hold it. ``example`` counts the questions passed in; inside
    ``Dataset.map(batched=True, with_indices=True)`` pass the batch's ``indices`` to get row numbers
    of the whole split instead.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("offset mappings need a fast tokenizer; load it with use_fast=True")
    # a question so long that the context's share of a window is not above the stride cannot be
    # windowed (the tokenizer panics): it keeps its first tokens, as many as leave room for it
    room = max_length - stride - tokenizer.num_special_tokens_to_add(pair=True) - 1
    if room < 1:
        raise ValueError(f"max_length {max_length} leaves no room for the context beside a stride of "
                         f"{stride}: lower the stride or raise max_length")
    questions = [q.lstrip() for q in questions]
    spans = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    questions = [q[: span[room - 1][1]] if len(span) > room else q for q, span in zip(questions, spans)]
    enc = tokenizer(questions, list(contexts), truncation="only_second",
                    max_length=max_length, stride=stride, return_overflowing_tokens=True,
                    return_offsets_mapping=True)
    out: dict[str, list[Any]] = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")
                                 if k in enc}
    mapping = list(enc["overflow_to_sample_mapping"])
    out["example"] = [indices[k] for k in mapping] if indices is not None else mapping
    out["offsets"] = [
        [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][w], enc.sequence_ids(w))]
        for w in range(len(out["example"]))
    ]
    if answers is not None:
        spans = []
        for example, offsets in zip(mapping, out["offsets"]):
            first = answers[example]
            start = first["answer_start"][0]
            spans.append(char_to_token_span(offsets, start, start + len(first["text"][0])) or (0, 0))
        out["start_positions"] = [s for s, _ in spans]
        out["end_positions"] = [e for _, e in spans]
    return out


def char_to_token_span(offsets: Offsets, start_char: int, end_char: int) -> tuple[int, int] | None:
    """First and last token of the characters ``[start_char, end_char)`` of the context: the
    tokens that overlap them. None when the window does not hold the whole span."""
    inside = [i for i, o in enumerate(offsets) if o is not None]
    if not inside or offsets[inside[0]][0] > start_char or offsets[inside[-1]][1] < end_char:
        return None
    first = next(i for i in inside if offsets[i][1] > start_char)
    last = next(i for i in reversed(inside) if offsets[i][0] < end_char)
    return first, last


def span_text(context: str, offsets: Offsets, start: int, end: int) -> str:
    """The context's characters from token ``start``'s first to token ``end``'s last."""
    first, last = offsets[start], offsets[end]
    if first is None or last is None:
        raise ValueError(f"tokens {start}..{end} are not both in the context")
    return context[first[0]: last[1]]


@dataclass
class SpanCheck:
    """How the reference answers survive characters → tokens → characters (:func:`check_spans`)."""

    exact: int = 0  # recovered character for character
    mid_word: list[tuple[str, str]] = field(default_factory=list)  # (answer, recovered): a boundary
    # falls inside a token, so the nearest token span is longer than the answer
    not_in_window: list[str] = field(default_factory=list)  # in no window whole
    other: list[tuple[str, str]] = field(default_factory=list)  # anything else (should be none)

    @property
    def total(self) -> int:
        return self.exact + len(self.mid_word) + len(self.not_in_window) + len(self.other)


def check_spans(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    contexts: Sequence[str],
    answers: Sequence[dict[str, list]],
    *,
    max_length: int = 384,
    stride: int = 128,
) -> SpanCheck:
    """Every reference answer (all of them, not only the first) mapped to its token span in the
    first window that holds it whole, and back to text with :func:`span_text`."""
    enc = windows(tokenizer, questions, contexts, max_length=max_length, stride=stride)
    by_example: dict[int, list[Offsets]] = {}
    for example, offsets in zip(enc["example"], enc["offsets"]):
        by_example.setdefault(example, []).append(offsets)
    check = SpanCheck()
    for k, (context, ans) in enumerate(zip(contexts, answers)):
        for text, start in zip(ans["text"], ans["answer_start"]):
            end = start + len(text)
            found = next(((o, span) for o in by_example[k]
                          if (span := char_to_token_span(o, start, end)) is not None), None)
            if found is None:
                check.not_in_window.append(text)
                continue
            offsets, (first, last) = found
            back = span_text(context, offsets, first, last)
            if back == text:
                check.exact += 1
            elif offsets[first][0] < start or offsets[last][1] > end:
                check.mid_word.append((text, back))
            else:
                check.other.append((text, back))
    return check


# ---------------------------------------------------------------------------- decoding


def best_span(
    start_logits: torch.Tensor, end_logits: torch.Tensor, offsets: Offsets, max_answer_tokens: int = 30
) -> tuple[float, int, int]:
    """``(score, start, end)`` maximising ``start_logits[s] + end_logits[e]`` over context tokens
    with ``s ≤ e < s + max_answer_tokens``."""
    n = len(offsets)
    in_context = torch.tensor([o is not None for o in offsets])
    scores = start_logits[:n, None].float() + end_logits[None, :n].float()
    band = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer_tokens - 1)
    allowed = band & in_context[:, None] & in_context[None, :]
    if not allowed.any():
        raise ValueError("the window has no context token")
    scores = scores.masked_fill(~allowed, float("-inf"))
    flat = int(scores.argmax())
    return float(scores.view(-1)[flat]), flat // n, flat % n


def decode(
    contexts: Sequence[str],
    examples: Sequence[int],
    offsets: Sequence[Offsets],
    start_logits: Sequence[torch.Tensor],
    end_logits: Sequence[torch.Tensor],
    max_answer_tokens: int = 30,
) -> list[str]:
    """The predicted answer text of every question: the best span over all its windows.

    ``examples``, ``offsets`` and the logits have one entry per window, as :func:`windows` made
    them; ``contexts`` one per question.
    """
    best: dict[int, tuple[float, str]] = {}
    for example, offs, s, e in zip(examples, offsets, start_logits, end_logits):
        score, start, end = best_span(s, e, offs, max_answer_tokens)
        if example not in best or score > best[example][0]:
            best[example] = (score, span_text(contexts[example], offs, start, end))
    missing = sorted(set(range(len(contexts))) - set(best))
    if missing:
        raise ValueError(f"questions {missing[:5]} have no window")
    return [best[k][1] for k in range(len(contexts))]


# ----------------------------------------------------------------------------- metrics


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, drop punctuation, drop the articles a/an/the,
    collapse whitespace (in this order)."""
    text = "".join(ch for ch in text.lower() if ch not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised reference, else 0.0."""
    return float(any(normalize_answer(prediction) == normalize_answer(r) for r in references))


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the bags of normalised tokens of one prediction and one reference."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, references: Sequence[str]) -> float:
    """The best :func:`token_f1` over the reference answers."""
    return max(token_f1(prediction, r) for r in references)


def squad_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean ``exact_match`` and ``f1`` over questions, as fractions (the official script prints
    them ×100)."""
    if len(predictions) != len(references) or not predictions:
        raise ValueError("need one prediction per question, and at least one question")
    n = len(predictions)
    return {"exact_match": sum(exact_match(p, r) for p, r in zip(predictions, references)) / n,
            "f1": sum(f1(p, r) for p, r in zip(predictions, references)) / n}


# --------------------------------------------------------------------------- baselines

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
STOPWORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom "
    "whose when where why how did does do that this these those it its as".split()
)


def sentences(context: str) -> list[str]:
    """The context cut after ``.``, ``!`` or ``?`` followed by whitespace."""
    return [s for s in SENTENCE_END.split(context.strip()) if s]


def first_sentence_baseline(contexts: Sequence[str]) -> list[str]:
    """Answer every question with the context's first sentence."""
    return [sentences(c)[0] for c in contexts]


def random_span_baseline(contexts: Sequence[str], lengths: Sequence[int], seed: int = 0) -> list[str]:
    """Chance for a span extractor: a span of whitespace words at a random place of each context,
    its length drawn from ``lengths`` (the training answers' lengths in words), seeded."""
    rng = random.Random(seed)
    out = []
    for context in contexts:
        words = context.split()
        n = min(rng.choice(lengths), len(words))
        start = rng.randrange(len(words) - n + 1)
        out.append(" ".join(words[start: start + n]))
    return out


def chance_scores(contexts: Sequence[str], references: Sequence[Sequence[str]], lengths: Sequence[int],
                  seed: int = 0, draws: int = 20) -> dict[str, float]:
    """Chance at one seed: the mean :func:`squad_scores` of ``draws`` :func:`random_span_baseline`
    answers, each draw seeded from ``seed`` — the floor as a run of its own, paired by seed with
    the trained runs."""
    rng = random.Random(seed)
    scores = [squad_scores(random_span_baseline(contexts, lengths, seed=rng.randrange(2**32)),
                           references) for _ in range(draws)]
    return {m: sum(s[m] for s in scores) / draws for m in ("exact_match", "f1")}


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without punctuation and a short stopword list."""
    return set(normalize_answer(text).split()) - STOPWORDS


def overlap_sentence_baseline(questions: Sequence[str], contexts: Sequence[str]) -> list[str]:
    """The sliding-window idea at sentence level: the context sentence sharing the most content
    words with the question (the first such sentence on ties), minus the question's words."""
    out = []
    for question, context in zip(questions, contexts):
        asked = content_words(question)
        candidates = sentences(context)
        best = max(candidates, key=lambda s: len(content_words(s) & asked))
        rest = [w for w in best.split() if normalize_answer(w) not in asked]
        out.append(" ".join(rest) if rest else best)
    return out


# ----------------------------------------------------------------- the model and one run


class SpanExtractor(EncoderHead):
    """The head family's linear layer giving every position a start and an end score: logits
    ``[B, T, 2]`` (padding at −∞). With ``labels`` ``[B, 2]`` (each window's answer start and
    end, 0 / 0 when it holds none), the mean of the start and end cross-entropies over positions
    (Devlin et al. 2019, §4.2)."""

    def __init__(self, encoder: nn.Module, dropout: float = 0.1):
        super().__init__(encoder, 2, dropout)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor | None = None) -> Output:
        logits = self.head(self.dropout(self.hidden(input_ids, attention_mask))).float()
        logits = logits.masked_fill(~attention_mask.bool()[..., None], float("-inf"))
        if labels is None:
            return Output(logits)
        loss = (F.cross_entropy(logits[..., 0], labels[:, 0])
                + F.cross_entropy(logits[..., 1], labels[:, 1])) / 2
        return Output(logits, loss)


def finetune_qa(backbone_name: str, train: Any, test: Any, budget: Budget, seed: int, *,
                scale: Scale, max_length: int = 384, stride: int = 128,
                max_answer_tokens: int = 30, method: Method = PLAIN, dev: Any = None,
                dev_evals: int = 4) -> Run:
    """Fine-tune ``backbone_name`` + :class:`SpanExtractor` on ``train``'s windows (SQuAD
    columns ``question``, ``context``, ``answers``) with the one runner
    (:func:`~tutorial_lib.finetuning.run`), then answer ``test``'s questions
    (:func:`decode`) and score them (:func:`squad_scores`): ``run.test``, with the answers in
    ``run.predictions``. Windows are at most ``max_length`` tokens (and the backbone's limit); HF
    backbones keep their word embeddings frozen, as every classifier here does; ``method`` changes
    the recipe as everywhere. A row also shows the number of training windows. ``dev`` (same
    columns): its :func:`squad_scores` about ``dev_evals`` times during training, in
    ``run.history.evals`` (the dev curve; scoring draws no random numbers, so the run trains
    exactly as without it)."""
    windows_seen: list[int] = []

    def build(bb: Backbone) -> SpanExtractor:
        bb.freeze_word_embeddings()
        return SpanExtractor(bb.encoder)

    def rows(bb: Backbone) -> list[dict]:
        question, context, answers = (data.column(train, c) for c in ("question", "context", "answers"))
        enc = windows(bb.tokenizer, question, context, answers,
                      max_length=min(max_length, bb.max_len), stride=stride)
        out = [{"input_ids": i, "labels": [s, e]}
               for i, s, e in zip(enc["input_ids"], enc["start_positions"], enc["end_positions"])]
        windows_seen.append(len(out))
        return out

    def answerer(bb: Backbone, split: Any) -> Callable[[nn.Module], list[str]]:
        contexts = data.column(split, "context")
        ev = windows(bb.tokenizer, data.column(split, "question"), contexts,
                     max_length=min(max_length, bb.max_len), stride=stride)

        def answer(model: nn.Module) -> list[str]:
            logits = position_logits(model, ev["input_ids"], bb.pad_id, budget.eval_batch_size)
            return decode(contexts, ev["example"], ev["offsets"], [lg[:, 0] for lg in logits],
                          [lg[:, 1] for lg in logits], max_answer_tokens)
        return answer

    def score(model: nn.Module, bb: Backbone) -> Scored:
        answers = answerer(bb, test)(model)
        scores = squad_scores(answers, [a["text"] for a in data.column(test, "answers")])
        return Scored(scores, {"exact_match": scores["exact_match"], "f1": scores["f1"],
                               "train_windows": windows_seen[-1]}, answers)

    def validate(bb: Backbone) -> Callable[[nn.Module], dict]:
        answer, refs = answerer(bb, dev), [a["text"] for a in data.column(dev, "answers")]
        return lambda model: squad_scores(answer(model), refs)

    return run(Recipe(build=build, backbone=backbone_name, budget=budget, method=method,
                      rows=rows, score=score,
                      validate=validate if dev is not None and len(dev["question"]) else None,
                      evals_per_epoch=evals_per_epoch(budget, dev_evals)), seed, scale=scale)
