"""The adversary of notebook 12's intermediate stage: how its head is built, trained alone, and
trained against the encoder — the reversed gradient and the remedies for an adversary that is
simply fooled.

The user-facing adversary stays the flag of a head, ``HeadConfig(reverse_gradient=True)``: the
encoder receives −λ × the head's gradient (Ganin & Lempitsky 2015; :class:`Adversary`'s default).
Such a head can be *fooled*: the encoder learns to make that one head confidently wrong (inverting
the tags keeps them readable), and a fresh probe still reads the property — Elazar & Goldberg
(2018) found adversarial removal incomplete in the same way, and 12's committed run shows it (the
reversed head at 0.2 % on its own tags, a fresh probe at 0.76 against 0.76 before). The options of
:class:`Adversary` are remedies from the literature, each cheap at the classroom budget:

* ``objective="confusion"`` — the head minimises its cross-entropy on **detached** features (it
  only learns to read), while the encoder is trained to make that head's prediction **uniform**:
  the cross-entropy of the head's softmax against the uniform distribution, −(1/C) Σ_c log p_c
  (the domain-confusion loss of Tzeng et al. 2015; Alvi et al. 2018 remove a bias with it). A
  confidently wrong head is as far from uniform as a right one, so it cannot be fooled that way.
  λ scales the confusion term; as with the reversed gradient it is the encoder's only loss, and
  Adam divides each update by the gradient's running scale, so λ barely changes how far the
  encoder moves.
* ``reinit_every=k`` — every k joint steps the head is re-initialised and retrained alone on the
  current, frozen encoder for ``retrain_steps``: the encoder cannot co-adapt with one head (a cheap
  stand-in for retraining the adversary to convergence).
* ``hidden=h`` — an MLP adversary (one hidden layer of width h): a stronger read-out than linear.

The helpers every stage uses live here too: a head's accuracy (:func:`head_accuracy`), its own
learning rate (:func:`head_rate`) and its head-only warm-up (:func:`train_head_alone`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from ignite.engine import Engine, Events
from torch import nn

from ...finetuning import Recipe, run
from ...heads import HeadConfig, MultiHeadModel, MultiTaskLoader, multihead_loss, split_batch
from ...models import IGNORE_INDEX
from ...params import decay_groups
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...training import Method, resumable_loader

OBJECTIVES = ("reverse", "confusion")


@dataclass(frozen=True)
class Adversary:
    """How an adversarial arm's head works against the encoder (module docstring): the
    ``objective`` ("reverse": the −λ gradient of ``HeadConfig(reverse_gradient=True)``;
    "confusion": the encoder pushes the head's prediction to uniform), an MLP head of width
    ``hidden`` (0: linear), and a re-initialised head every ``reinit_every`` joint steps (0: never),
    retrained alone for ``retrain_steps`` (None: as many as the stage's head-only warm-up)."""

    objective: str = "reverse"
    hidden: int = 0
    reinit_every: int = 0
    retrain_steps: int | None = None

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {self.objective!r}")
        if self.hidden < 0 or self.reinit_every < 0 or (self.retrain_steps or 0) < 0:
            raise ValueError(f"hidden, reinit_every and retrain_steps are ≥ 0: {self}")

    @property
    def label(self) -> str:
        """A short name: "reversed gradient", "confusion", "… + re-init/10", "… + MLP 256"."""
        parts = ["reversed gradient" if self.objective == "reverse" else "confusion"]
        if self.reinit_every:
            parts.append(f"re-init/{self.reinit_every}")
        if self.hidden:
            parts.append(f"MLP {self.hidden}")
        return " + ".join(parts)


REVERSE = Adversary()  # the flag as it is: HeadConfig(reverse_gradient=True), a linear head


def head_config(n_tags: int, adversary: Adversary, *, reverse: bool, lambda_: float) -> HeadConfig:
    """The stage head's configuration: a token head over ``n_tags``, MLP with
    ``adversary.hidden``; the gradient-reversal flag when the arm is adversarial (``reverse``)
    with the "reverse" objective (the confusion objective needs no reversal layer)."""
    return HeadConfig(n_tags, "token", reverse_gradient=reverse and adversary.objective == "reverse",
                      lambda_=lambda_, hidden=adversary.hidden)


def confusion(logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of softmax(``logits``) against the uniform distribution, averaged over the
    rows: −(1/C) Σ_c log p_c. Its minimum, log C, is the uniform prediction."""
    return -F.log_softmax(logits.float(), dim=-1).mean(-1).mean()


def frozen(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``head(x)`` with the head's parameters detached: the gradient reaches ``x`` only."""
    params = {name: p.detach() for name, p in head.named_parameters()}
    return torch.func.functional_call(head, params, (x,))


def stage_loss(adversary: Adversary, lambda_: float, head: str = "pos"):
    """The joint stage's ``loss_fn``. "reverse" (and every non-adversarial arm): the head's
    cross-entropy (:func:`~tutorial_lib.heads.multihead_loss`; a reversal layer, if the head has
    one, turns it on the encoder). "confusion": the head's cross-entropy on detached features
    (trains the head only) + ``lambda_`` × :func:`confusion` of the head, parameters detached, on
    the features (trains the encoder only). ``model.last_losses`` keeps both terms."""
    if adversary.objective == "reverse":
        return multihead_loss

    def loss_fn(model: MultiHeadModel, batch: dict) -> torch.Tensor:
        part = split_batch(batch)[head]
        hidden = model.encode(part["input_ids"], part["attention_mask"])
        labels = part["labels"]
        keep = labels != IGNORE_INDEX
        module = model.heads[head]
        read = F.cross_entropy(module(hidden.detach())[keep].float(), labels[keep])
        confuse = confusion(frozen(module, hidden)[keep])
        model.last_losses = {head: float(read.detach()), "confusion": float(confuse.detach())}
        return read + lambda_ * confuse
    return loss_fn


def stage_handlers(adversary: Adversary, *, steps: int,
                   retrain: Callable[[MultiHeadModel, int], float],
                   check: Callable[[MultiHeadModel, int], bool] | None,
                   check_every: int, head: str = "pos") -> tuple[Callable, dict]:
    """``Method.on_trainer`` for the joint stage and what it records (``{"losses": [...],
    "reinits": [...], "checks": [...]}``): every step the head's losses; with
    ``adversary.reinit_every`` = k, after every k-th step but the last, the head re-initialised (its
    optimizer state dropped) and ``retrain(model, count)`` (the head alone on the frozen encoder); with
    ``check``, every ``check_every`` steps ``check(model, step)``, which stops the stage when True."""
    record: dict[str, list] = {"losses": [], "reinits": [], "checks": []}

    def attach(trainer: Engine, model: MultiHeadModel, optimizer: torch.optim.Optimizer) -> None:
        @trainer.on(Events.ITERATION_COMPLETED)
        def _losses(engine: Engine) -> None:
            record["losses"].append(dict(model.last_losses))

        if adversary.reinit_every:
            @trainer.on(Events.ITERATION_COMPLETED(every=adversary.reinit_every))
            def _reinit(engine: Engine) -> None:
                if engine.state.iteration >= steps:
                    return  # nothing trains against a head re-initialised at the end
                module = model.heads[head]
                for p in module.parameters():
                    optimizer.state.pop(p, None)  # the old head's Adam moments
                module.reset_parameters()
                retrain(model, len(record["reinits"]))
                record["reinits"].append(engine.state.iteration)

        if check is not None and check_every:
            @trainer.on(Events.ITERATION_COMPLETED(every=check_every))
            def _check(engine: Engine) -> None:
                record["checks"].append(engine.state.iteration)
                if check(model, engine.state.iteration):
                    engine.terminate()
    return attach, record


def last_losses(record: dict, n: int = 5) -> dict[str, float]:
    """The mean of each recorded loss over the stage's last ``n`` steps (``{}`` if none)."""
    rows = record["losses"][-n:]
    keys = sorted({k for r in rows for k in r})
    return {k: sum(r[k] for r in rows if k in r) / sum(k in r for r in rows) for k in keys}


# --- the heads' helpers: a head's accuracy, its own rate, training it alone --------------------


@torch.no_grad()
def head_accuracy(model: MultiHeadModel, loader: Sequence[dict], head: str) -> float:
    """Accuracy of one head over a loader (token heads: over the labelled positions)."""
    dev, amp = device(), autocast_dtype()
    model.to(dev).eval()
    correct = total = 0
    for batch in loader:
        with autocast(dev, amp):
            logits = model(batch["input_ids"].to(dev), batch["attention_mask"].to(dev),
                           head=head).logits
        labels = batch["labels"].to(dev)
        keep = labels != IGNORE_INDEX
        correct += int((logits.argmax(-1)[keep] == labels[keep]).sum())
        total += int(keep.sum())
    return correct / max(total, 1)


def head_rate(scale: float):
    """``Method.param_groups``: every parameter at the base rate, the POS head's × ``scale``."""
    def groups(model: MultiHeadModel, lr: float, weight_decay: float) -> list[dict]:
        head = list(model.heads["pos"].parameters())
        return (decay_groups(model, weight_decay, exclude=head, name="model")
                + decay_groups(model, weight_decay, params=head, name="pos head", lr_scale=scale))
    return groups


def train_head_alone(model: MultiHeadModel, head: str, rows, collate, budget: Budget, *,
                     lr: float, steps: int, batch_size: int, seed: int) -> float:
    """Train one head for ``steps`` steps at a constant ``lr``, the encoder frozen (a ``run``
    that continues the caller's random streams); returns the seconds. The head's gradient
    reversal does not matter here: nothing upstream of it is trained."""
    if steps <= 0:
        return 0.0
    params = list(model.heads[head].parameters())
    recipe = Recipe(build=lambda _: model, budget=budget.replace(lr=lr), steps=steps,
                    schedule=None, reseed=False,
                    loader=lambda _, s: MultiTaskLoader({head: resumable_loader(
                        rows, batch_size=batch_size, seed=s, collate_fn=collate)}, main=head),
                    method=Method(loss_fn=multihead_loss,
                                  param_groups=lambda m, lr_, wd: decay_groups(m, wd, params=params)))
    frozen_params = [p for p in model.encoder.parameters() if p.requires_grad]
    for p in frozen_params:
        p.requires_grad_(False)
    try:
        return run(recipe, seed).seconds
    finally:
        for p in frozen_params:
            p.requires_grad_(True)
