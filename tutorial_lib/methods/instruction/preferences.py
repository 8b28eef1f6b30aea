"""Preferences from ConvAI2: the real reply is preferred to a distractor.

ConvAI2 (PersonaChat) lists, for every turn of the bot's side, 20 candidate replies: the real
one and 19 distractors from other dialogues (notebook 16). That is a preference pair for free:
**chosen** = the gold reply, **rejected** = a distractor, the **prompt** = the bot's persona (as
the system message) and the dialogue so far (the partner as *user*, the bot as *assistant*), in
the model's chat template. The local copy is the validation set only, split **by dialogue**
(``tutorial_lib.data``'s ConvAI2 entry: no dialogue in two splits).

The evaluation is 16's: **Hits@1** — how often the gold reply gets the highest score among N
candidates (chance 1/N) — and the gold reply's perplexity, but each model ranks by its **own**
score: a language model by the mean log-probability of each reply (:func:`hits_at_1`, ``"logp"``),
a DPO model by its implicit reward ``β (log πθ(y|x) - log π_ref(y|x))`` (``"reward"``), the
ranking its loss trained. The candidates of a turn are scored with the context run once
(:func:`~tutorial_lib.methods.instruction.zeroshot.candidate_logps`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .dpo import pair_row
from .instructions import chat_text, render
from .zeroshot import candidate_logps


@dataclass(frozen=True)
class Turn:
    """One bot reply to predict: the persona, the history (the partner's utterance last) and the
    candidate replies, ``candidates[gold]`` the real one."""

    persona: tuple[str, ...]
    history: tuple[str, ...]
    candidates: tuple[str, ...]
    gold: int


def turns(dialogues: Any, n_candidates: int | None = None, *, seed: int = 0) -> list[Turn]:
    """Every turn of ConvAI2 rows (``personality``, ``utterances``; the gold reply is listed last),
    with the gold reply and ``n_candidates - 1`` distractors drawn at random (None: all 19),
    **shuffled** (seeded), so the gold position says nothing."""
    rng = random.Random(seed)
    out = []
    for row in dialogues:
        for utterance in row["utterances"]:
            *distractors, gold = utterance["candidates"]
            if n_candidates is not None:
                distractors = rng.sample(distractors, n_candidates - 1)
            candidates = [*distractors, gold]
            rng.shuffle(candidates)
            out.append(Turn(tuple(row["personality"]), tuple(utterance["history"]), tuple(candidates),
                            candidates.index(gold)))
    return out


def sample(turns_: Sequence[Turn], n: int | None, seed: int = 0) -> list[Turn]:
    """``n`` turns drawn at random (None: all), kept in their order."""
    if n is None or n >= len(turns_):
        return list(turns_)
    return [turns_[i] for i in sorted(random.Random(seed).sample(range(len(turns_)), n))]


def seed_turns(dialogues: Any, n: int | None, seeds: Sequence[int], n_candidates: int | None = None
               ) -> dict[int, list[Turn]]:
    """Test turns shared out among ``seeds``: ``n`` turns (None: all) drawn once with the first
    seed and dealt out, so every seed scores **other** turns, each with its own draw of
    ``n_candidates`` candidates (:func:`turns` with the seed). Pooled over the seeds they are
    ``n`` different turns: the units of a test against chance (``premises.above_floor_items``)."""
    seeds = list(seeds)
    every = turns(dialogues)
    picked = sorted(random.Random(seeds[0]).sample(range(len(every)), len(every) if n is None
                                                   else min(n, len(every))))
    out = {}
    for k, seed in enumerate(seeds):
        drawn = turns(dialogues, n_candidates, seed=seed)
        out[seed] = [drawn[i] for i in picked[k::len(seeds)]]
    return out


def messages(turn: Turn, max_history: int = 3) -> list[dict[str, str]]:
    """The turn as a conversation: the persona as the system message, then the last
    ``max_history`` utterances, the partner's as *user* and the bot's as *assistant*, counted
    back from the partner's last one."""
    persona = "You are chatting with someone. Your persona: " + " ".join(turn.persona)
    history = turn.history[-max_history:] if max_history else ()
    roles = ["user" if (len(history) - i) % 2 == 1 else "assistant" for i in range(len(history))]
    return [{"role": "system", "content": persona},
            *({"role": r, "content": u} for r, u in zip(roles, history))]


def pair_turns(turns_: Sequence[Turn], *, seed: int = 0) -> list[Turn]:
    """Each turn with two candidates, ``(chosen, rejected)``: the gold reply first, then one of
    its distractors drawn at random (seeded) — the pairs :func:`pairs` trains DPO on, as turns
    that another model (16's double heads) can train on too."""
    rng = random.Random(seed)
    out = []
    for t in turns_:
        rejected = rng.choice([c for i, c in enumerate(t.candidates) if i != t.gold])
        out.append(Turn(t.persona, t.history, (t.candidates[t.gold], rejected), 0))
    return out


def pairs(tokenizer: Any, turns_: Sequence[Turn], *, seed: int = 0, max_history: int = 3,
          max_len: int | None = None) -> list[dict[str, list[int]]]:
    """One DPO pair per turn (:func:`~.dpo.pair_row`): chosen = the gold reply, rejected = one of
    the turn's distractors drawn at random (seeded; :func:`pair_turns`)."""
    return [pair_row(tokenizer, messages(t, max_history), *t.candidates, max_len)
            for t in pair_turns(turns_, seed=seed)]


def gold_rows(tokenizer: Any, turns_: Sequence[Turn], *, max_history: int = 3,
              max_len: int | None = None) -> list[dict[str, list[int]]]:
    """SFT rows on the gold replies of the same turns (the loss on the reply only)."""
    return [render(tokenizer, messages(t, max_history), t.candidates[t.gold], max_len) for t in turns_]


@dataclass(frozen=True)
class ReplyScores:
    """One turn's candidates scored by one model: each reply's summed log-probability (its
    tokens and the end of turn) and its number of tokens; ``gold`` the real reply."""

    total: torch.Tensor
    tokens: torch.Tensor
    gold: int

    def pick(self, order: Sequence[int], gold: int) -> ReplyScores:
        """The scores of the candidates ``order`` (:func:`places`), the real reply at ``gold``."""
        i = torch.tensor(list(order), dtype=torch.long)
        return ReplyScores(self.total[i], self.tokens[i], gold)


def places(full: Turn, turn: Turn) -> list[int]:
    """Where each of ``turn``'s candidates sits among ``full``'s (the same turn with more of its
    candidates): score ``full`` once, then every draw of candidates picks its scores."""
    if (full.persona, full.history) != (turn.persona, turn.history):
        raise ValueError("places: the two turns are not the same turn (persona or history differ)")
    return [full.candidates.index(c) for c in turn.candidates]


def score(model: nn.Module, tokenizer: Any, turns_: Sequence[Turn], *, max_history: int = 3,
          max_len: int | None = None) -> list[ReplyScores]:
    """Every candidate of every turn, the context run once per turn (inference mode). A reply is
    scored as training renders it: its tokens and the template's end of turn."""
    model.eval()
    out = []
    for t in turns_:
        context = messages(t, max_history)
        before = chat_text(tokenizer, context)
        replies = [tokenizer(chat_text(tokenizer, context, c)[len(before):], add_special_tokens=False)
                   ["input_ids"] for c in t.candidates]
        ids = tokenizer(before, add_special_tokens=False)["input_ids"]
        if max_len is not None:
            ids = ids[-(max_len - max(map(len, replies))):]
        total, tokens = candidate_logps(model, ids, replies)
        out.append(ReplyScores(total, tokens, t.gold))
    return out


def hits_at_1(scored: Sequence[ReplyScores], how: str = "logp",
              reference: Sequence[ReplyScores] | None = None, beta: float = 0.1) -> dict[str, Any]:
    """Hits@1 of one model's ranking and the gold reply's perplexity: ``how="logp"`` ranks by the
    mean log-probability per token, ``"reward"`` by DPO's implicit reward against
    ``reference`` (the reference model's scores of the same candidates). ``correct``: per turn."""
    if how not in ("logp", "reward"):
        raise ValueError(f"how must be 'logp' or 'reward', got {how!r}")
    if how == "reward" and reference is None:
        raise ValueError("ranking by the implicit reward needs the reference model's scores")
    correct = []
    for i, s in enumerate(scored):
        rank = s.total / s.tokens if how == "logp" else beta * (s.total - reference[i].total)
        correct.append(bool(rank.argmax() == s.gold))
    nll = -sum(float(s.total[s.gold]) for s in scored)
    tokens = sum(float(s.tokens[s.gold]) for s in scored)
    return {"hits_at_1": sum(correct) / len(correct), "reply_ppl": float(torch.tensor(nll / tokens).exp()),
            "correct": correct, "turns": len(scored), "candidates": len(scored[0].total)}


@torch.inference_mode()
def reply(model: nn.Module, tokenizer: Any, turn: Turn, *, max_history: int = 3,
          max_new_tokens: int = 30) -> str:
    """The model's own reply to ``turn`` (greedy: the same text every run), the end of turn off."""
    ids = tokenizer(chat_text(tokenizer, messages(turn, max_history)), add_special_tokens=False)["input_ids"]
    prompt = torch.tensor([ids], device=next(model.parameters()).device)
    out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                         max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, prompt.shape[1]:], skip_special_tokens=True).strip()
