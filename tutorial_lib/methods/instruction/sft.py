"""Supervised fine-tuning (SFT) of a causal LM with LoRA, through the tutorial's one recipe.

**LoRA** (Hu et al. 2022; notebook 14 builds it by hand and checks it against ``peft``): each
adapted weight ``W`` becomes ``W + (α/r)·B·A`` with ``A`` ``[r, d]`` random and ``B`` ``[d, r]``
zero, so training starts from exactly the pretrained model and trains ``2·r·d`` numbers per
matrix. :func:`with_lora` puts ``peft``'s LoRA on ``targets`` (the attention's query and value
projections by default), optionally in the top ``top_layers`` layers only: backpropagation then
stops at the lowest adapted layer, which on a CPU makes a step much cheaper than adapting all 30.

:func:`finetune` is a recipe run by :func:`tutorial_lib.finetuning.run` — the one runner (AdamW,
warm-up and linear decay, clipping, the resumable data stream) — with the loss on the response
tokens only (:func:`~tutorial_lib.methods.instruction.zeroshot.response_loss`). :func:`run` is one
seed's SFT and zero-shot evaluation (the recipe's ``score``), a :class:`tutorial_lib.finetuning.Run`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from ... import finetuning
from ...finetuning import Recipe, Run, Scored
from ...floors import Floor
from ...runtime import device_of
from ...settings import Budget
from ...training import Method, pad_collate
from .instructions import Item
from .zeroshot import evaluate, response_loss, sequence_logps


def with_lora(lm: nn.Module, *, r: int = 8, alpha: float = 16.0,
              targets: Sequence[str] = ("q_proj", "v_proj"), top_layers: int | None = None,
              seed: int = 0) -> PeftModel:
    """``lm`` (a causal LM) with ``peft``'s LoRA of rank ``r`` and scale ``alpha / r`` on the
    ``targets`` projections, in the top ``top_layers`` layers (None: every layer), the pretrained
    weights frozen; ``A`` drawn with ``seed``. ``model.disable_adapter()`` gives back the
    pretrained model (DPO's reference)."""
    n = lm.config.num_hidden_layers
    layers = None if top_layers is None else list(range(max(0, n - top_layers), n))
    config = LoraConfig(task_type="CAUSAL_LM", r=r, lora_alpha=alpha, lora_dropout=0.0,
                        target_modules=list(targets), layers_to_transform=layers)
    torch.manual_seed(seed)
    with warnings.catch_warnings():  # peft 0.21 reads a deprecated transformers 5 attribute
        warnings.filterwarnings("ignore", r".*is_gradient_checkpointing", FutureWarning)
        return get_peft_model(lm, config)


def finetune(model: nn.Module, rows: Sequence[Mapping], *, seed: int, budget: Budget, pad_id: int,
             loss: Callable[[nn.Module, Mapping], torch.Tensor] = response_loss,
             score: Callable[[nn.Module, object], Scored] | None = None, name: str = "",
             progress: bool = False) -> Run:
    """Train ``model`` on rendered ``rows`` (``input_ids``, ``labels``: -100 on the prompt) with
    the one runner (:func:`tutorial_lib.finetuning.run` of a recipe under ``budget``), the loss on
    the response tokens only (or ``loss``); ``score``: the recipe's test at the end."""
    recipe = Recipe(build=lambda _: model, budget=budget, method=Method(loss_fn=loss),
                    rows=lambda _: list(rows), collate=lambda _: pad_collate(pad_id), score=score,
                    name=name)
    return finetuning.run(recipe, seed, progress=progress)


@torch.inference_mode()
def example_losses(model: nn.Module, rows: Sequence[Mapping], *, pad_id: int, batch_size: int = 8
                   ) -> list[float]:
    """Each rendered row's loss on its response: the mean negative log-likelihood per response
    token (nats), in the rows' order — a dev set's losses before and after fine-tuning are then
    paired example by example (``premises.loss_fell``)."""
    model.eval()
    collate = pad_collate(pad_id)
    out: list[float] = []
    for start in range(0, len(rows), batch_size):
        batch = collate(list(rows[start: start + batch_size]))
        args = [batch[k].to(device_of(model)) for k in ("input_ids", "attention_mask", "labels")]
        total, count = sequence_logps(model, *args)
        out += (-total / count.clamp(min=1)).tolist()
    return out


def run(lm: nn.Module, tokenizer: Any, rows: Sequence[Mapping], items: Mapping[str, Sequence[Item]],
        floors: Mapping[str, Floor], *, seed: int, budget: Budget, lora: Mapping[str, Any],
        length_norm: bool = False, name: str = "SFT", backbone: str = "smollm2",
        keep_model: bool = False, dev_rows: Sequence[Mapping] = (), calibrate: bool = False) -> Run:
    """One seed: LoRA (``lora``: :func:`with_lora`'s options) on ``lm``, SFT on ``rows``, then
    zero-shot accuracy on every held-out task (:func:`~.zeroshot.evaluate`, ``calibrate`` as
    there). The run's ``scores`` hold each task's result, and with ``dev_rows`` (rendered rows
    the training never saw) ``scores["dev"]["losses"]``: each one's loss after training
    (:func:`example_losses`); its ``columns`` each task's accuracy; ``keep_model``: the trained
    model stays on the run (``model``; else None, so that runs do not hold 540 MB each)."""
    model, scores = with_lora(lm, seed=seed, **lora), {}

    def score(m: nn.Module, _: object) -> Scored:
        scores.update(evaluate(m, tokenizer, items, floors, length_norm=length_norm,
                               max_len=budget.max_len, batch_size=budget.eval_batch_size,
                               calibrate=calibrate))
        columns = {task: s["accuracy"] for task, s in scores.items()}
        if dev_rows:
            scores["dev"] = {"losses": example_losses(m, dev_rows, pad_id=tokenizer.pad_token_id,
                                                      batch_size=budget.eval_batch_size)}
        return Scored({"accuracy": sum(columns.values()) / len(columns)}, columns)

    result = finetune(model, rows, seed=seed, budget=budget, pad_id=tokenizer.pad_token_id,
                      score=score, name=backbone)
    result.name, result.scores, result.model = name, scores, model if keep_model else None
    return result
