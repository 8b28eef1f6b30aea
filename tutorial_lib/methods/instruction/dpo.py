"""Direct Preference Optimization (DPO; Rafailov et al. 2023), in our own code beside its equation.

Data: a prompt :math:`x` with a preferred reply :math:`y_w` (chosen) and a worse one :math:`y_l`
(rejected). RLHF would fit a reward model to such pairs and then maximise it with RL, kept near
the starting model by a KL penalty of weight :math:`\\beta`. DPO's observation: the optimum of
that problem is :math:`\\pi^*(y|x) \\propto \\pi_{ref}(y|x)\\, e^{r(x,y)/\\beta}`, so the reward
is a function of the policy itself — the **implicit reward**

.. math:: \\hat r_\\theta(x, y) = \\beta \\left(\\log \\pi_\\theta(y \\mid x)
          - \\log \\pi_{ref}(y \\mid x)\\right)

— and the Bradley-Terry likelihood of the preferences becomes a loss on the policy directly:

.. math:: \\mathcal{L}_{DPO} = -\\log \\sigma\\Big(\\beta \\big[(\\log \\pi_\\theta(y_w|x) -
          \\log \\pi_{ref}(y_w|x)) - (\\log \\pi_\\theta(y_l|x) - \\log \\pi_{ref}(y_l|x))\\big]\\Big)

averaged over pairs. :math:`\\log \\pi(y|x)` is the reply's log-probability **summed over its
tokens only** (:func:`~tutorial_lib.methods.instruction.zeroshot.sequence_logps`, the prompt's
labels -100). :math:`\\pi_{ref}` is **frozen**: the model before DPO. With LoRA it costs no copy:
it is the same network with its adapter disabled (``model.disable_adapter()``), run without
gradient — the gradient flows through the policy only. At the start the policy *is* the
reference, every reward is 0 and the loss is :math:`\\log 2`.

``tests/methods/instruction/test_dpo.py`` checks :func:`dpo_loss` against a hand computation
and, where ``trl`` is installed, the whole loss against ``trl``'s ``DPOTrainer`` on one batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...finetuning import Recipe, Run, run
from ...settings import Budget
from ...training import Method, pad_ids
from .instructions import render
from .zeroshot import sequence_logps


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float = 0.1
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPO loss of a batch of pairs from the four summed log-probabilities ``[B]`` each:
    ``-log σ(β[(log πθ(y_w|x) - log π_ref(y_w|x)) - (log πθ(y_l|x) - log π_ref(y_l|x))])``,
    averaged; with the chosen and rejected replies' implicit rewards (detached, ``[B]``)."""
    chosen_reward = implicit_reward(policy_chosen, ref_chosen, beta)
    rejected_reward = implicit_reward(policy_rejected, ref_rejected, beta)
    loss = -F.logsigmoid(chosen_reward - rejected_reward).mean()
    return loss, chosen_reward.detach(), rejected_reward.detach()


def implicit_reward(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float = 0.1) -> torch.Tensor:
    """DPO's implicit reward ``β (log πθ(y|x) - log π_ref(y|x))``: what the policy's ranking of
    replies is, once trained (the reference's own preferences taken out)."""
    return beta * (policy_logps - ref_logps)


@contextlib.contextmanager
def reference(model: nn.Module) -> Iterator[nn.Module]:
    """The frozen reference: a ``peft`` model with its adapter disabled, without gradient."""
    with torch.no_grad(), model.disable_adapter():
        yield model


def pair_row(tokenizer: Any, prompt: str, chosen: str, rejected: str, max_len: int | None = None
             ) -> dict[str, list[int]]:
    """One preference pair as two rendered rows (:func:`~.instructions.render`: the labels -100
    on the prompt): ``chosen_input_ids``, ``chosen_labels``, ``rejected_input_ids``, ``rejected_labels``."""
    c, r = render(tokenizer, prompt, chosen, max_len), render(tokenizer, prompt, rejected, max_len)
    return {"chosen_input_ids": c["input_ids"], "chosen_labels": c["labels"],
            "rejected_input_ids": r["input_ids"], "rejected_labels": r["labels"]}


def collate_pairs(pad_id: int) -> Callable[[list[dict]], dict[str, torch.Tensor]]:
    """Pairs as one right-padded batch of ``2B`` rows, the ``B`` chosen first, then the ``B``
    rejected (``trl``'s layout): ``input_ids``, ``attention_mask``, ``labels``; and
    ``ref_logps`` ``[2B]`` where the rows carry the reference's (:func:`with_reference_logps`)."""
    def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
        seqs = [r["chosen_input_ids"] for r in rows] + [r["rejected_input_ids"] for r in rows]
        labels = [r["chosen_labels"] for r in rows] + [r["rejected_labels"] for r in rows]
        ids, mask = pad_ids(seqs, pad_id)
        width = ids.shape[1]
        batch = {"input_ids": ids, "attention_mask": mask,
                 "labels": torch.tensor([y + [-100] * (width - len(y)) for y in labels])}
        if all("ref_chosen" in r for r in rows):
            ref = [r["ref_chosen"] for r in rows] + [r["ref_rejected"] for r in rows]
            batch["ref_logps"] = torch.tensor(ref)
        return batch
    return collate


@torch.no_grad()
def with_reference_logps(ref_model: nn.Module, pairs: Sequence[Mapping], pad_id: int,
                         batch_size: int = 8) -> list[dict]:
    """``pairs`` with the reference's summed log-probabilities of both replies (``ref_chosen``,
    ``ref_rejected``), computed once: the reference is frozen, so every step and every seed of
    DPO can read them instead of running it again (``trl``'s ``precompute_ref_log_probs``).
    ``ref_model``: the model before DPO (for LoRA, the base model itself)."""
    collate, out = collate_pairs(pad_id), []
    for start in range(0, len(pairs), batch_size):
        rows = [dict(r) for r in pairs[start:start + batch_size]]
        batch = collate(rows)
        logps, _ = sequence_logps(ref_model, batch["input_ids"], batch["attention_mask"], batch["labels"])
        for r, chosen, rejected in zip(rows, *logps.float().chunk(2)):
            out.append({**r, "ref_chosen": float(chosen), "ref_rejected": float(rejected)})
    return out


def batch_loss(model: nn.Module, batch: Mapping[str, torch.Tensor], beta: float = 0.1,
               ref_model: nn.Module | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """:func:`dpo_loss` of a :func:`collate_pairs` batch: the policy's summed log-probabilities
    with gradient, the reference's without (the batch's ``ref_logps`` where computed once, else
    ``ref_model``, else ``model`` with its adapter disabled); and the batch's mean rewards and
    reward accuracy (chosen above rejected)."""
    args = batch["input_ids"], batch["attention_mask"], batch["labels"]
    policy, _ = sequence_logps(model, *args)
    if "ref_logps" in batch:  # computed once, before training (with_reference_logps)
        ref = batch["ref_logps"].to(policy)
    elif ref_model is None:
        with reference(model):
            ref, _ = sequence_logps(model, *args)
    else:
        with torch.no_grad():
            ref, _ = sequence_logps(ref_model, *args)
    loss, chosen, rejected = dpo_loss(*policy.chunk(2), *ref.chunk(2), beta)
    return loss, {"chosen reward": float(chosen.mean()), "rejected reward": float(rejected.mean()),
                  "reward accuracy": float((chosen > rejected).float().mean())}


def finetune(model: nn.Module, pairs: Sequence[Mapping], *, seed: int, budget: Budget, pad_id: int,
             beta: float = 0.1, progress: bool = False) -> Run:
    """DPO of a ``peft`` model on ``pairs`` (:func:`pair_row`'s) with the one runner
    (:func:`tutorial_lib.finetuning.run` of a recipe under ``budget``), the reference = the same
    model with its adapter disabled. The history's rows carry each step's mean rewards and reward
    accuracy."""
    parts: list[dict[str, float]] = []

    def loss(m: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        value, part = batch_loss(m, batch, beta)
        parts.append(part)
        return value

    recipe = Recipe(build=lambda _: model, budget=budget, method=Method(loss_fn=loss),
                    rows=lambda _: list(pairs), collate=collate_pairs)
    result = run(recipe, seed, progress=progress)
    for row, part in zip(result.history.train, parts):
        row.update(part)
    return result
