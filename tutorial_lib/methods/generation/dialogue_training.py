"""TransferTransfo on a CPU: the frozen lower layers run once per turn, the top ones every step.

Fine-tuning only the top ``k`` layers of a causal LM (with the speaker embeddings entering at the
first trained layer, ``DoubleHeads(segment_layer=L - k)``) leaves everything below that layer
unchanged by training: the hidden states entering it are a fixed function of the input. So
:func:`turn_states` computes them **once** per turn — the context (persona + history) once, then
every candidate reply on top of the context's key/value cache (the candidates share their
context: ``Tc + N·Tr`` tokens instead of ``N·(Tc + Tr)``) — and every training step, every
seed and every evaluation runs only the top ``k`` layers on them (:meth:`DoubleHeads.forward`
with a ``"states"`` batch). The not-fine-tuned model reads the same states with its pretrained
top layers, so before vs after fine-tuning is scored on identical inputs.
``tests/methods/generation/test_dialogue_training.py`` checks that this path gives the scores
and losses of the plain one (:func:`~tutorial_lib.methods.generation.dialogue.collate`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ...params import decay_groups
from ...runtime import autocast, autocast_dtype, device, seed_everything
from ...settings import Budget
from ...training import FitResult, Method, ParamGroups, fit_with, resumable_loader
from .dialogue import (
    BOT,
    IGNORE,
    ChatFormat,
    DoubleHeads,
    Turn,
    build_input,
    double_heads_loss,
    only_layers,
    token_nll,
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


def draw(states: TurnStates, n: int | None, rng: random.Random) -> TurnStates:
    """The gold reply and ``n - 1`` random distractors (None: all), in a random order."""
    others = [i for i in range(len(states.replies)) if i != states.gold]
    chosen = [states.gold, *(others if n is None else rng.sample(others, n - 1))]
    rng.shuffle(chosen)
    return replace(states, replies=[states.replies[i] for i in chosen],
                   reply_ids=[states.reply_ids[i] for i in chosen], gold=chosen.index(states.gold))


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
) -> FitResult:
    """The double-heads fine-tuning of the top layers (:func:`train_top`) through the one
    training recipe (:func:`tutorial_lib.training.fit_with` the ``budget``), on cached states;
    ``head_lr``: the new parts' own rate (None: the budget's)."""
    seed_everything(seed)
    train_top(model)
    loader = resumable_loader(list(train), batch_size=budget.batch_size, seed=seed,
                              collate_fn=states_batch)
    method = Method(loss_fn=lambda m, batch: double_heads_loss(m, batch, lm_coef, mc_coef)[0],
                    param_groups=new_parts_rate(head_lr) if head_lr else None)
    return fit_with(model, loader, budget, method=method)


@torch.no_grad()
def evaluate(model: DoubleHeads, turns_: Sequence[TurnStates], how: str = "mc",
             batch_size: int = 4) -> dict[str, Any]:
    """Hits@1 (scores from the classification head, ``"mc"``, or the LM's mean log-probability
    of each candidate, ``"lm"``) and the perplexity of the gold reply, over ``turns_``; also the
    per-turn ``correct`` list."""
    if how not in ("mc", "lm"):
        raise ValueError(f"how must be 'mc' or 'lm', got {how!r}")
    dev = device()
    model.to(dev).eval()
    correct: list[bool] = []
    nll, tokens = 0.0, 0
    for i in range(0, len(turns_), batch_size):
        batch = {k: v.to(dev) for k, v in states_batch(turns_[i:i + batch_size]).items()}
        with autocast(dev, autocast_dtype(dev)):
            scores, h = model(batch)
        B, N, T = batch["segment_ids"].shape
        per_token = token_nll(model, h, batch["reply_labels" if how == "lm" else "labels"].reshape(B * N, T))
        per_row = per_token.sum(-1).view(B, N)
        gold = per_row[torch.arange(B), batch["gold"]]
        labelled = (batch["reply_labels"][..., 1:] != IGNORE).sum(-1)
        nll += float(gold.sum())
        tokens += int(labelled[torch.arange(B), batch["gold"]].sum())
        if how == "lm":
            scores = -per_row / labelled
        correct += (scores.argmax(-1) == batch["gold"]).tolist()
    return {"hits_at_1": sum(correct) / len(correct), "reply_ppl": float(torch.tensor(nll / tokens).exp()),
            "correct": correct, "turns": len(correct), "candidates": len(turns_[0].replies)}


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
     "perplexity": 17.51, "source": "Wolf et al. 2019, Table 1 (recalled, unverified)"},
    {"model": "TransferTransfo (GPT, fine-tuned)", "split": "ConvAI2 hidden test", "Hits@1 (%)": 80.7,
     "perplexity": 16.28, "source": "Wolf et al. 2019, Table 1 (recalled, unverified)"},
)
"""The paper's numbers (20 candidates; word-level perplexity of GPT's BPE, not comparable with a
sub-word perplexity of another tokenizer) — recalled, not checked against the paper."""
