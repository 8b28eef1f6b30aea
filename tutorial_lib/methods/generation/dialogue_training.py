"""TransferTransfo on a CPU: the frozen lower layers run once per turn, the top ones every step.

Fine-tuning only the top ``k`` layers of a causal LM (with the speaker embeddings entering at the
first trained layer, ``DoubleHeads(segment_layer=L - k)``) leaves everything below that layer
unchanged by training: the hidden states entering it are a fixed function of the input. So
:func:`turn_states` computes them **once** per turn — the context (persona + history) once, then
every candidate reply on top of the context's key/value cache (the candidates share their
context: ``Tc + N·Tr`` tokens instead of ``N·(Tc + Tr)``) — and every training step, every
seed and every evaluation runs only the top ``k`` layers on them, sharing the context the same
way (:func:`turn_scores` on a :func:`context_batch`). The not-fine-tuned model reads the same
states with its pretrained top layers, so before vs after fine-tuning is scored on identical
inputs; it is scored once on all of a turn's candidates (:func:`score`), and each seed's draw
of candidates picks its scores (:func:`picked`). :func:`finetune` is one seed's fine-tuning (and
evaluation, given test turns): a recipe run by :func:`tutorial_lib.finetuning.run`.
``tests/methods/generation/test_dialogue_training.py`` checks that these paths give the scores
and losses of the plain one (:func:`~tutorial_lib.methods.generation.dialogue.collate`) and of
:class:`DoubleHeads` on a :func:`states_batch` (every candidate with its whole context).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...finetuning import Recipe, Run, Scored, run
from ...params import decay_groups
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...training import Method, ParamGroups
from .dialogue import (
    BOT,
    IGNORE,
    ChatFormat,
    DoubleHeads,
    Turn,
    build_input,
    only_layers,
)


@dataclass(frozen=True)
class TurnStates:
    """One turn as hidden states entering the first trained layer: the context's ``[Tc, d]`` with
    its speaker ids, and each candidate reply's ``[len, d]`` with its token ids (end marker
    included); ``candidates[gold]`` is the real reply."""

    context: torch.Tensor
    context_segments: list[int]
    replies: list[torch.Tensor]
    reply_ids: list[list[int]]
    gold: int
    order: tuple[int, ...] | None = None  # these candidates' places in the cached turn (None: all)


@torch.no_grad()
def turn_states(
    model: DoubleHeads, tokenizer: Any, turn: Turn, fmt: ChatFormat | None = None,
    max_history: int = 5, max_len: int = 256, amp_dtype: torch.dtype | None | str = "auto",
) -> TurnStates:
    """The states of ``turn`` entering layer ``model.segment_layer`` (bf16 to halve the memory):
    the context once, then all candidates at once on its key/value cache. Too long: the oldest
    context tokens go (as :func:`~tutorial_lib.methods.generation.dialogue.build_input` does). ``fmt``:
    the speakers' markers (default: ChatML); ``amp_dtype``: autocast (``"auto"``: the machine's)."""
    fmt = fmt or ChatFormat()
    replies = [tokenizer(c + fmt.end, add_special_tokens=False)["input_ids"] for c in turn.candidates]
    prompt = build_input(tokenizer, turn.persona, turn.history, None, fmt, max_history)
    keep = max_len - max(map(len, replies))
    context, segments = prompt.input_ids[-keep:], prompt.segment_ids[-keep:]
    decoder = model.lm.get_decoder()
    n, width = len(replies), max(map(len, replies))
    reply_ids = torch.full((n, width), tokenizer.pad_token_id or 0)
    mask = torch.zeros(n, len(context) + width, dtype=torch.long)
    mask[:, : len(context)] = 1
    for i, r in enumerate(replies):
        reply_ids[i, : len(r)] = torch.tensor(r)
        mask[i, len(context): len(context) + len(r)] = 1
    dev = next(model.parameters()).device
    ids, reply_ids, mask = torch.tensor([context], device=dev), reply_ids.to(dev), mask.to(dev)
    amp = autocast_dtype(dev) if amp_dtype == "auto" else amp_dtype
    if model.segment_layer == 0:  # the paper's place: the token embeddings themselves
        h_context, h_replies = decoder.embed_tokens(ids)[0], decoder.embed_tokens(reply_ids)
    else:
        with only_layers(decoder, 0, model.segment_layer, norm=False), autocast(dev, amp):
            out = decoder(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            cache.batch_repeat_interleave(n)
            h_replies = decoder(input_ids=reply_ids, attention_mask=mask, past_key_values=cache,
                                use_cache=True).last_hidden_state
        h_context = out.last_hidden_state[0]
    return TurnStates(h_context.to("cpu", torch.bfloat16), segments,
                      [h_replies[i, : len(r)].to("cpu", torch.bfloat16) for i, r in enumerate(replies)],
                      replies, turn.gold)


def select(states: TurnStates, chosen: Sequence[int]) -> TurnStates:
    """The candidates ``chosen`` (places in ``states``; the gold reply among them) in that order;
    ``order`` says where each came from in the cached turn."""
    if states.gold not in chosen:
        raise ValueError("select: the chosen candidates must include the gold reply")
    places = states.order or range(len(states.replies))
    return replace(states, replies=[states.replies[i] for i in chosen],
                   reply_ids=[states.reply_ids[i] for i in chosen], gold=list(chosen).index(states.gold),
                   order=tuple(places[i] for i in chosen))


def draw(states: TurnStates, n: int | None, rng: random.Random) -> TurnStates:
    """The gold reply and ``n - 1`` random distractors (None: all), in a random order
    (:func:`select`)."""
    others = [i for i in range(len(states.replies)) if i != states.gold]
    chosen = [states.gold, *(others if n is None else rng.sample(others, n - 1))]
    rng.shuffle(chosen)
    return select(states, chosen)


def draw_all(states: Sequence[TurnStates], n: int | None, seed: int) -> list[TurnStates]:
    """:func:`draw` for every turn, seeded (the same ``seed``: the same candidates)."""
    rng = random.Random(seed)
    return [draw(s, n, rng) for s in states]


def states_batch(turns_: Sequence[TurnStates]) -> dict[str, torch.Tensor]:
    """Turns as a ``[B, N, T]`` batch of :func:`~tutorial_lib.methods.generation.dialogue.collate`'s keys,
    with ``states`` ``[B, N, T, d]`` (float32) in place of ``input_ids``."""
    B, N = len(turns_), len(turns_[0].replies)
    T = max(len(t.context_segments) + len(r) for t in turns_ for r in t.reply_ids)
    d = turns_[0].context.shape[-1]
    zeros = torch.zeros(B, N, T, dtype=torch.long)
    batch = {"states": torch.zeros(B, N, T, d), "segment_ids": zeros.clone(), "attention_mask": zeros.clone(),
             "reply_labels": torch.full((B, N, T), IGNORE), "last": torch.zeros(B, N, dtype=torch.long),
             "gold": torch.tensor([t.gold for t in turns_])}
    for b, t in enumerate(turns_):
        c = len(t.context_segments)
        for n, (h, ids) in enumerate(zip(t.replies, t.reply_ids)):
            k = c + len(ids)
            batch["states"][b, n, :c] = t.context.float()
            batch["states"][b, n, c:k] = h.float()
            batch["segment_ids"][b, n, :c] = torch.tensor(t.context_segments)
            batch["segment_ids"][b, n, c:k] = BOT
            batch["attention_mask"][b, n, :k] = 1
            batch["reply_labels"][b, n, c:k] = torch.tensor(ids)
            batch["last"][b, n] = k - 1
    is_gold = torch.arange(N)[None, :, None] == batch["gold"][:, None, None]
    batch["labels"] = batch["reply_labels"].masked_fill(~is_gold, IGNORE)
    return batch


def context_batch(turns_: Sequence[TurnStates]) -> dict[str, torch.Tensor]:
    """Turns as padded tensors for :func:`turn_scores`: each context **once** (``context``
    ``[B, Tc, d]`` with ``context_segments`` and ``context_length``) and the candidates' states and
    token ids (``replies`` ``[B, N, Tr, d]``, ``reply_ids`` ``[B, N, Tr]``, -100 past a reply's
    end), with ``gold`` ``[B]``. The states keep their cached dtype."""
    B, N = len(turns_), len(turns_[0].replies)
    tc = max(len(t.context_segments) for t in turns_)
    tr = max(len(ids) for t in turns_ for ids in t.reply_ids)
    d, dtype = turns_[0].context.shape[-1], turns_[0].context.dtype
    batch = {"context": torch.zeros(B, tc, d, dtype=dtype),
             "context_segments": torch.zeros(B, tc, dtype=torch.long),
             "context_length": torch.tensor([len(t.context_segments) for t in turns_]),
             "replies": torch.zeros(B, N, tr, d, dtype=dtype), "reply_ids": torch.full((B, N, tr), IGNORE),
             "gold": torch.tensor([t.gold for t in turns_])}
    for b, t in enumerate(turns_):
        c = len(t.context_segments)
        batch["context"][b, :c] = t.context
        batch["context_segments"][b, :c] = torch.tensor(t.context_segments)
        for n, (h, ids) in enumerate(zip(t.replies, t.reply_ids)):
            batch["replies"][b, n, : len(ids)] = h
            batch["reply_ids"][b, n, : len(ids)] = torch.tensor(ids)
    return batch


def turn_scores(model: DoubleHeads, batch: dict[str, torch.Tensor], every_reply: bool = True
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The top layers on a :func:`context_batch`, sharing each context: it runs **once**, and the
    ``N`` candidates run on its key/value cache (``Tc + N·Tr`` tokens instead of ``N·(Tc + Tr)``,
    as :func:`turn_states` does below). ``[B, N]`` each: the candidates' scores (the
    classification head on each reply's last token; with ``lm_prior``, plus the LM's mean
    log-probability of the reply), the summed NLL of each reply's tokens under the LM head and
    their number — for every candidate, or only the gold one (``every_reply=False``: training's
    LM loss needs no more; the rest stay 0). The same numbers as :class:`DoubleHeads` on
    :func:`states_batch` (tested); differentiable, so training uses it too."""
    decoder, head = model.lm.get_decoder(), model.lm.get_output_embeddings()
    B, N, width = batch["reply_ids"].shape
    dev = batch["context"].device
    every_reply = every_reply or model.lm_prior
    bot = model.segments(torch.tensor([BOT], device=dev))
    heads, before, targets, rows = [], [], [], []
    with only_layers(decoder, model.segment_layer):
        for b, c in enumerate(batch["context_length"].tolist()):
            x = batch["context"][b, :c].float() + model.segments(batch["context_segments"][b, :c])
            out = decoder(inputs_embeds=x[None], use_cache=True)
            cache = out.past_key_values
            cache.batch_repeat_interleave(N)
            real = batch["reply_ids"][b] != IGNORE
            mask = torch.cat([torch.ones(N, c, dtype=torch.long, device=dev), real.long()], dim=1)
            h = decoder(inputs_embeds=batch["replies"][b].float() + bot, attention_mask=mask,
                        past_key_values=cache).last_hidden_state
            heads.append(model.mc_head(h[torch.arange(N, device=dev), real.sum(-1) - 1]).squeeze(-1))
            # reply token j is predicted by the position before it: the context's last for j = 0
            pred = torch.cat([out.last_hidden_state[:, -1:].expand(N, 1, -1), h[:, :-1]], dim=1)
            keep = real if every_reply else real & (torch.arange(N, device=dev) == batch["gold"][b])[:, None]
            before.append(pred[keep])
            targets.append(batch["reply_ids"][b][keep])
            rows.append((b * N + torch.arange(N, device=dev))[:, None].expand(N, width)[keep])
    rows_ = torch.cat(rows)
    token = F.cross_entropy(head(torch.cat(before)).float(), torch.cat(targets), reduction="none")
    nll = torch.zeros(B * N, device=dev).index_add(0, rows_, token).view(B, N)
    tokens = torch.zeros(B * N, device=dev).index_add(0, rows_, torch.ones_like(token)).view(B, N)
    scores = torch.stack(heads).float()
    if model.lm_prior:  # the head corrects the LM's own ranking: at zero it *is* that ranking
        scores = scores - nll / tokens.clamp(min=1)
    return scores, nll, tokens


def context_loss(model: DoubleHeads, batch: dict[str, torch.Tensor], lm_coef: float = 2.0,
                 mc_coef: float = 1.0) -> tuple[torch.Tensor, dict[str, float]]:
    """:func:`~tutorial_lib.methods.generation.dialogue.double_heads_loss` on a
    :func:`context_batch`: λ_lm · (LM loss on the gold reply's tokens) + λ_mc · (cross-entropy of
    the gold candidate among the N), and both parts as floats."""
    scores, nll, tokens = turn_scores(model, batch, every_reply=False)
    rows = torch.arange(len(batch["gold"]), device=scores.device), batch["gold"]
    lm = nll[rows].sum() / tokens[rows].sum()
    mc = F.cross_entropy(scores, batch["gold"])
    return lm_coef * lm + mc_coef * mc, {"lm": float(lm.detach()), "mc": float(mc.detach())}


def train_top(model: DoubleHeads) -> None:
    """Train only what sits at or above ``model.segment_layer``: those decoder layers, the final
    norm, the speaker embeddings and the classification head (the tied LM head stays frozen)."""
    decoder = model.lm.get_decoder()
    for p in model.parameters():
        p.requires_grad_(False)
    for module in [*list(decoder.layers)[model.segment_layer:], decoder.norm, model.segments, model.mc_head]:
        for p in module.parameters():
            p.requires_grad_(True)


def new_parts_rate(head_lr: float) -> ParamGroups:
    """AdamW groups: the pretrained layers at the run's rate, the new parts (speaker embeddings,
    classification head; no weight decay) at ``head_lr`` (an ``lr_scale`` on the schedule)."""

    def groups(model: nn.Module, lr: float, weight_decay: float) -> list[dict]:
        new = [*model.segments.parameters(), *model.mc_head.parameters()]
        return decay_groups(model, weight_decay, exclude=new) + [
            {"params": new, "weight_decay": 0.0, "lr_scale": head_lr / lr}]

    return groups


def finetune(
    model: DoubleHeads, train: Sequence[TurnStates], *, seed: int, budget: Budget,
    lm_coef: float = 2.0, mc_coef: float = 1.0, head_lr: float | None = None,
    prepare: Callable[[nn.Module], None] = train_top, test: Sequence[TurnStates] | None = None,
    backbone: str = "smollm2",
) -> Run:
    """The double-heads fine-tuning of the top layers (``prepare``: :func:`train_top`) through the
    one runner (:func:`tutorial_lib.finetuning.run` of a recipe under ``budget``), on cached
    states, each context run once per step (:func:`context_loss`); ``head_lr``: the new parts' own
    rate (None: the budget's). The history's rows carry both parts of the loss (``lm``, ``mc``).
    ``test``: turns scored at the end (:func:`evaluate`, by the head): the :class:`Run`'s ``test``
    metrics, its row's Hits@1 by the head and by the LM and the gold reply's perplexity."""
    parts: list[dict[str, float]] = []

    def loss(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        total, part = context_loss(m, batch, lm_coef, mc_coef)
        parts.append(part)
        return total

    def score(m: nn.Module, _: object) -> Scored:
        scores = evaluate(m, test, "mc", budget.eval_batch_size)
        return Scored(scores, {k: scores[k] for k in ("hits_at_1", "hits_at_1_lm", "reply_ppl")})

    method = Method(prepare=prepare, loss_fn=loss,
                    param_groups=new_parts_rate(head_lr) if head_lr else None)
    recipe = Recipe(build=lambda _: model, budget=budget, method=method, rows=lambda _: list(train),
                    collate=lambda _: context_batch, score=score if test is not None else None,
                    name=backbone)
    result = run(recipe, seed)
    for row, part in zip(result.history.train, parts):
        row.update(part)
    return result


@dataclass(frozen=True)
class TurnScores:
    """One turn's candidates, scored by one model: ``head`` (the classification head's scores),
    ``lm`` (the LM's mean log-probability of each reply), ``nll`` and ``tokens`` (each reply's
    summed NLL and its length); ``candidates[gold]`` is the real reply."""

    head: torch.Tensor
    lm: torch.Tensor
    nll: torch.Tensor
    tokens: torch.Tensor
    gold: int

    def pick(self, order: Sequence[int], gold: int) -> TurnScores:
        """The scores of the candidates ``order`` (a :func:`draw`'s), the real reply at ``gold``."""
        i = torch.tensor(list(order))
        return TurnScores(self.head[i], self.lm[i], self.nll[i], self.tokens[i], gold)


@torch.inference_mode()
def score(model: DoubleHeads, turns_: Sequence[TurnStates], batch_size: int = 4) -> list[TurnScores]:
    """Every candidate of every turn scored both ways in one pass (:func:`turn_scores`, inference
    mode, each context once, on the model's device)."""
    dev = device()
    model.to(dev).eval()
    out: list[TurnScores] = []
    for i in range(0, len(turns_), batch_size):
        batch = {k: v if k == "context_length" else v.to(dev)  # lengths: bookkeeping, read here
                 for k, v in context_batch(turns_[i:i + batch_size]).items()}
        with autocast(dev, autocast_dtype(dev)):
            head, nll, tokens = turn_scores(model, batch)
        lm = -nll / tokens
        out += [TurnScores(head[b].cpu(), lm[b].cpu(), nll[b].cpu(), tokens[b].cpu(), int(batch["gold"][b]))
                for b in range(len(head))]
    return out


def picked(scored: Sequence[TurnScores], drawn: Sequence[TurnStates]) -> list[TurnScores]:
    """The scores of each :func:`draw` (its ``order``) among a turn's scored candidates: score
    all candidates once, then every seed's draw costs nothing."""
    return [s.pick(t.order or range(len(t.replies)), t.gold) for s, t in zip(scored, drawn, strict=True)]


def metrics(scored: Sequence[TurnScores]) -> dict[str, Any]:
    """Hits@1 ranked by the classification head (``hits_at_1``) and by the LM's mean
    log-probability (``hits_at_1_lm``), each turn's ``correct`` / ``correct_lm``, and the gold
    reply's perplexity (``reply_ppl``: exp of its NLL per token over all turns)."""
    head = [bool(s.head.argmax() == s.gold) for s in scored]
    lm = [bool(s.lm.argmax() == s.gold) for s in scored]
    nll = sum(float(s.nll[s.gold]) for s in scored)
    tokens = sum(float(s.tokens[s.gold]) for s in scored)
    return {"hits_at_1": sum(head) / len(head), "hits_at_1_lm": sum(lm) / len(lm),
            "reply_ppl": float(torch.tensor(nll / tokens).exp()), "correct": head, "correct_lm": lm,
            "turns": len(scored), "candidates": len(scored[0].head)}


def evaluate(model: DoubleHeads, turns_: Sequence[TurnStates], how: str = "mc",
             batch_size: int = 4) -> dict[str, Any]:
    """:func:`metrics` of :func:`score`; ``hits_at_1`` ranks by the classification head
    (``"mc"``) or by the LM's mean log-probability of each candidate (``"lm"``: a model without a
    trained head); both are there as ``hits_at_1_mc`` and ``hits_at_1_lm``."""
    if how not in ("mc", "lm"):
        raise ValueError(f"how must be 'mc' or 'lm', got {how!r}")
    out = metrics(score(model, turns_, batch_size))
    out["hits_at_1_mc"], out["correct_mc"] = out["hits_at_1"], out["correct"]
    if how == "lm":
        out["hits_at_1"], out["correct"] = out["hits_at_1_lm"], out["correct_lm"]
    return out


def sample(turns_: Sequence[Turn], n: int | None, seed: int = 0) -> list[Turn]:
    """``n`` random turns (None: all), kept in their order."""
    if n is None or n >= len(turns_):
        return list(turns_)
    return [turns_[i] for i in sorted(random.Random(seed).sample(range(len(turns_)), n))]


def without_persona(turns_: Sequence[Turn]) -> list[Turn]:
    """The same turns with no persona in the input (the ablation)."""
    return [replace(t, persona=[]) for t in turns_]


def cache(model: DoubleHeads, tokenizer: Any, turns_: Sequence[Turn],
          max_history: int = 5) -> list[TurnStates]:
    """:func:`turn_states` of every turn."""
    return [turn_states(model, tokenizer, t, max_history=max_history) for t in turns_]


PAPER = (
    {"model": "TransferTransfo (GPT, fine-tuned)", "split": "ConvAI2 validation", "Hits@1 (%)": 82.1,
     "perplexity": 17.51, "source": "Wolf et al. 2019, Table 1 (checked 2026-11-27)"},
    {"model": "TransferTransfo (GPT, fine-tuned)", "split": "ConvAI2 hidden test", "Hits@1 (%)": 80.7,
     "perplexity": 16.28, "source": "Wolf et al. 2019, Table 1 (recalled, unverified)"},
)
"""The paper's numbers (20 candidates; word-level perplexity of GPT's BPE, not comparable with a
sub-word perplexity of another tokenizer). The validation row was checked against the paper by the
project's teaching review of 2026-11-27; the hidden-test row is recalled, not checked."""
