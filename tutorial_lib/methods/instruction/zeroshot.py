"""Zero-shot evaluation by ranking: which answer does the model find most probable?

A held-out question (:class:`~tutorial_lib.methods.instruction.instructions.Item`) has a prompt
and a few answer options ("yes" / "no"). Rather than generate text and parse it, the model
**scores** each option: its log-probability given the prompt,

.. math:: \\log \\pi(y \\mid x) = \\sum_{t=1}^{|y|} \\log \\pi(y_t \\mid x, y_{<t}),

summed over the option's tokens (or divided by their number: ``length_norm``), and answers with
the highest — T0's and FLAN's rank classification, the scoring of 09's prompts and of 16's LM
ranking. Accuracy is then compared with the task's **majority floor**: a model that always
says the commonest answer scores it without reading anything.

:func:`sequence_logps` is the one log-probability of this chapter: the DPO loss
(:mod:`.dpo`) and the dialogue ranking (:mod:`.preferences`) read it too. It runs the decoder
and applies the LM head only where a token is scored (the head is a fifth of SmolLM2's cost
per token). :func:`candidate_logps` scores several answers to one prompt, running the prompt
**once** and the answers on its key/value cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ...floors import Floor
from ...models import IGNORE_INDEX
from ...runtime import device_of
from ...training import pad_ids
from .instructions import Item, chat_text, content_free


def sequence_logps(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's summed log-probability of its labelled tokens (``labels`` ≠ -100, the
    response) given everything before them, and their number: ``([B], [B])``. Differentiable:
    DPO and SFT train through it. ``model``: a causal LM (or a ``peft`` model around one)."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = labels[:, 1:]  # token t+1 is predicted at position t
    keep = targets != IGNORE_INDEX
    logits = head(hidden[:, :-1][keep]).float()
    token = logits.log_softmax(-1).gather(-1, targets[keep][:, None]).squeeze(-1)
    rows = torch.arange(len(labels), device=labels.device)[:, None].expand_as(targets)[keep]
    total = torch.zeros(len(labels), device=token.device, dtype=token.dtype).index_add(0, rows, token)
    return total, keep.sum(-1)


def response_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Supervised fine-tuning's loss: the mean negative log-likelihood of the batch's response
    tokens (the same number as a Hugging Face causal LM's ``loss`` with these labels)."""
    total, count = sequence_logps(model, batch["input_ids"], batch["attention_mask"], batch["labels"])
    return -total.sum() / count.sum().clamp(min=1)


@torch.inference_mode()
def candidate_logps(model: nn.Module, prompt: Sequence[int], candidates: Sequence[Sequence[int]]
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed log-probability of every candidate continuation of one prompt, and its length
    (``[N]`` each): the prompt runs once, the ``N`` candidates on its key/value cache
    (``P + N·C`` tokens instead of ``N·(P + C)``)."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    dev = device_of(model)
    n, width = len(candidates), max(map(len, candidates))
    ids = torch.zeros(n, width, dtype=torch.long)
    real = torch.zeros(n, width, dtype=torch.bool)
    for i, c in enumerate(candidates):
        ids[i, : len(c)], real[i, : len(c)] = torch.tensor(list(c)), True
    ids, real = ids.to(dev), real.to(dev)
    out = decoder(input_ids=torch.tensor([list(prompt)], device=dev), use_cache=True)
    cache = out.past_key_values
    cache.batch_repeat_interleave(n)
    mask = torch.cat([torch.ones(n, len(prompt), dtype=torch.long, device=dev), real.long()], dim=1)
    h = decoder(input_ids=ids, attention_mask=mask, past_key_values=cache).last_hidden_state
    # candidate token j is predicted at the position before it: the prompt's last one for j = 0
    before = torch.cat([out.last_hidden_state[:, -1:].expand(n, 1, -1), h[:, :-1]], dim=1)
    token = head(before[real]).float().log_softmax(-1).gather(-1, ids[real][:, None]).squeeze(-1)
    rows = torch.arange(n, device=dev)[:, None].expand(n, width)[real]
    total = torch.zeros(n, device=dev).index_add(0, rows, token)
    return total.cpu(), real.sum(-1).cpu()


def prompt_ids(tokenizer: Any, prompt: str, max_len: int | None = None, room: int = 8) -> list[int]:
    """The chat-templated prompt's token ids, ending where the answer starts; longer than
    ``max_len - room``: its oldest tokens go (as in training's rows)."""
    ids = tokenizer(chat_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    return ids if max_len is None else ids[-(max_len - room):]


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every prompt shares (the chat template's system message and turn
    header), at most one short of the shortest prompt: each prompt keeps a token of its own."""
    if not prompts:
        return 0
    first, limit = prompts[0], min(map(len, prompts)) - 1
    k = 0
    while k < limit and all(p[k] == first[k] for p in prompts):
        k += 1
    return k


@torch.inference_mode()
def next_token_logps(model: nn.Module, prompts: Sequence[Sequence[int]], batch_size: int = 8
                     ) -> list[torch.Tensor]:
    """The next-token log-probabilities ``[V]`` after each prompt, the prompts in right-padded
    batches (shortest first): a one-token answer's score is one entry of it. The prefix all
    prompts share (:func:`shared_prefix`: the system message) runs once per batch and the rest
    on its key/value cache, as in :func:`candidate_logps`."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    dev = device_of(model)
    k = shared_prefix(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[torch.Tensor | None] = [None] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start: start + batch_size]
        ids, mask = pad_ids([prompts[i][k:] for i in chunk], 0)
        ids, mask, cache = ids.to(dev), mask.to(dev), None
        if k:
            cache = decoder(input_ids=torch.tensor([list(prompts[0][:k])], device=dev),
                            use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(chunk))
        full = torch.cat([torch.ones(len(chunk), k, dtype=mask.dtype, device=dev), mask], dim=1)
        hidden = decoder(input_ids=ids, attention_mask=full, past_key_values=cache).last_hidden_state
        last = hidden[torch.arange(len(chunk), device=dev), mask.sum(-1) - 1]
        for i, row in zip(chunk, head(last).float().log_softmax(-1).cpu()):
            out[i] = row
    return out


def option_scores(model: nn.Module, tokenizer: Any, items: Sequence[Item], max_len: int | None = None,
                  batch_size: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(summed log-probability, tokens) of every option of every item; an option is scored as the
    text the answer would start with (no end-of-turn marker). Items whose options are one token
    each are read off one batched forward of their prompts (:func:`next_token_logps`: "yes" and
    "no" are one token in SmolLM2's vocabulary), the others by :func:`candidate_logps`."""
    model.eval()
    options = [[tokenizer(o, add_special_tokens=False)["input_ids"] for o in item.options] for item in items]
    prompts = [prompt_ids(tokenizer, item.prompt, max_len) for item in items]
    short = [i for i, opts in enumerate(options) if all(len(o) == 1 for o in opts)]
    out: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(items)
    for i, logp in zip(short, next_token_logps(model, [prompts[i] for i in short], batch_size)):
        out[i] = logp[[o[0] for o in options[i]]], torch.ones(len(options[i]), dtype=torch.long)
    for i in sorted(set(range(len(items))) - set(short)):
        out[i] = candidate_logps(model, prompts[i], options[i])
    return out


def choose(total: torch.Tensor, count: torch.Tensor, length_norm: bool = False,
           prior: torch.Tensor | None = None) -> int:
    """The option with the highest summed log-probability (per token with ``length_norm``);
    ``prior``: the same scores on a content-free input, subtracted first (contextual
    calibration, Zhao et al. 2021: divide each option's probability by its probability when
    there is nothing to read)."""
    score = total / count.clamp(min=1) if length_norm else total
    return int((score if prior is None else score - prior).argmax())


def evaluate(model: nn.Module, tokenizer: Any, items: Mapping[str, Sequence[Item]],
             floors: Mapping[str, Floor], *, length_norm: bool = False, max_len: int | None = None,
             batch_size: int = 8, calibrate: bool = False) -> dict[str, dict[str, Any]]:
    """Every held-out task's zero-shot accuracy by ranking its options, beside its majority
    floor: ``{task: {"accuracy", "floor", "correct" and "answers" (per item: right or not, the
    option chosen)}}``. ``calibrate``: also the same ranking after contextual calibration
    (:func:`choose`'s ``prior``, from the task's :func:`~.instructions.content_free` question:
    one more prompt a task) as ``"calibrated accuracy"``, ``"calibrated correct"`` and
    ``"calibrated answers"``."""
    out = {}
    for name, task_items in items.items():
        scores = option_scores(model, tokenizer, task_items, max_len, batch_size)
        answers = [choose(t, c, length_norm) for t, c in scores]
        correct = [a == item.label for a, item in zip(answers, task_items)]
        out[name] = {"accuracy": float(np.mean(correct)), "floor": floors[name].mean,
                     "correct": correct, "answers": answers}
        if calibrate:
            (t0, c0), = option_scores(model, tokenizer, [content_free(name)], max_len, batch_size)
            prior = t0 / c0.clamp(min=1) if length_norm else t0
            fixed = [choose(t, c, length_norm, prior) for t, c in scores]
            right = [a == item.label for a, item in zip(fixed, task_items)]
            out[name] |= {"calibrated accuracy": float(np.mean(right)), "calibrated correct": right,
                          "calibrated answers": fixed}
    return out
