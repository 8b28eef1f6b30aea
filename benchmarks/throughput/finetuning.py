"""Fine-tuning cost of each method per step, relative to plain fine-tuning."""


from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from tutorial_lib.backbones import Backbone
from tutorial_lib.methods.peft import adapters
from tutorial_lib.methods.prompts import dart, prompting
from tutorial_lib.methods.tdt import regularized, tdt
from tutorial_lib.models import TransformerClassifier, TransformerLM, count_parameters
from tutorial_lib.params import ADAM_BETAS, ADAM_EPS, decay_groups, make_optimizer
from tutorial_lib.runtime import autocast_dtype
from tutorial_lib.tokenization import encode_with_cls, train_wordpiece
from tutorial_lib.training import Method, create_trainer

from .measure import BenchSize, bench_size, finetune_flops_per_step, peak_memory, sync

# --- fine-tuning: cost of each method per step -----------------------------------------------------

_WORDS = ("the movie was good and fun . a film about people who were bad at it , "
          "but the story is great , the actors are fine and the music was terrible . "
          "It was a dog and a cat in the city of London , what is the name of ?").split()
TEMPLATE = "<x> It was [MASK] ."
VERBALIZER = {"negative": "bad", "positive": "good"}
LABEL_NAMES = ["negative", "positive"]
METHODS = ("fine-tuning", "adapters (m=64)", "TDT", "R-Drop", "manual prompt", "DART")
PASSES = {"fine-tuning": 1, "adapters (m=64)": 1, "TDT": 3, "R-Drop": 2, "manual prompt": 1,
          "DART": 2}


def small_tokenizer():
    """A WordPiece vocabulary trained in well under a second on a few synthetic lines."""
    rng = random.Random(0)
    lines = [" ".join(rng.choice(_WORDS) for _ in range(12)) for _ in range(200)]
    return train_wordpiece(lines + [" ".join(_WORDS)] * 4, vocab_size=200)


def _texts(n: int, n_words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(n_words)) for _ in range(n)]


@dataclass
class _Method:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch: dict[str, torch.Tensor]
    loss_fn: Callable | None = None


def _build_method(name: str, size: BenchSize, tok, texts: list[str], labels: list[int],
                  lr: float, weight_decay: float = 0.01, seed: int = 0) -> _Method:
    """A random-init model, its optimiser and one batch (every row ``ft_seq_len`` tokens long)."""
    torch.manual_seed(seed)
    vocab = max(size.model.vocab_size, len(tok))
    if name in ("manual prompt", "DART"):
        cfg = size.model_config(False, vocab)
        mlm = Backbone("ours-mlm", "masked", tok, TransformerLM(cfg), cfg.max_len)
        label_ids = prompting.verbalizer_ids(mlm, VERBALIZER, LABEL_NAMES)
        if name == "DART":
            model = dart.DARTClassifier(mlm, TEMPLATE, label_ids, fluency_weight=1.0, mask_rate=0.1)
            groups = model.param_groups(prompt_lr=lr)(model, lr, weight_decay)
        else:
            model = prompting.PromptClassifier(mlm, TEMPLATE, label_ids)
            groups = decay_groups(model, weight_decay)
        rows = model.encode([{"text": t, "label": y} for t, y in zip(texts, labels)],
                            max_len=size.ft_seq_len)
        batch = prompting.prompt_collate(mlm.pad_id)(rows)
        opt = torch.optim.AdamW(groups, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
        return _Method(model, opt, batch)

    model = TransformerClassifier(size.model_config(True, vocab), num_labels=len(LABEL_NAMES))
    ids = encode_with_cls(tok, texts, size.ft_seq_len)
    batch = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones(len(ids), len(ids[0]),
                                                                          dtype=torch.long),
             "labels": torch.tensor(labels)}
    methods = {"fine-tuning": Method(), "adapters (m=64)": Method(prepare=adapters.prepare_adapters(64)),
               "TDT": tdt.method(), "R-Drop": regularized.rdrop(alpha=1.0)}
    if name not in methods:
        raise ValueError(f"unknown method {name!r}: choose one of {METHODS}")
    method = methods[name]
    if method.prepare:
        method.prepare(model)
    return _Method(model, make_optimizer(model, lr, weight_decay), batch, method.loss_fn)


def finetune_costs(
    size: BenchSize | str = "tiny",
    dev: torch.device | str = "cpu",
    *,
    methods: Sequence[str] = METHODS,
    amp: torch.dtype | None | str = "auto",
    lr: float = 1e-3,
    seed: int = 0,
) -> list[dict]:
    """Median seconds per fine-tuning step of each method, relative to plain fine-tuning (1.0).

    Every method trains through ``training.create_trainer`` (the notebooks' step: autocast,
    backward, clip 1.0, AdamW) on the same texts and labels, every row exactly ``ft_seq_len``
    tokens, same model size, random init; blocks of steps interleaved over the methods. Plain
    fine-tuning and the prompt methods differ in their backbone (causal LM + [CLS] head vs masked
    LM + [MASK]), as in the notebooks.
    """
    size = bench_size(size) if isinstance(size, str) else size
    dev = torch.device(dev)
    amp = autocast_dtype(dev) if amp == "auto" else amp
    if "fine-tuning" not in methods:
        methods = ("fine-tuning", *methods)
    tok = small_tokenizer()
    texts = _texts(size.ft_batch_size, size.ft_seq_len + 8, seed)
    labels = [i % len(LABEL_NAMES) for i in range(size.ft_batch_size)]
    built = {name: _build_method(name, size, tok, texts, labels, lr, seed=seed) for name in methods}

    def block(name: str, n: int, cpu: list[float] | None = None) -> float:
        m = built[name]
        trainer = create_trainer(m.model, m.optimizer, device=dev, amp_dtype=amp, max_norm=1.0,
                                 **({"loss_fn": m.loss_fn} if m.loss_fn else {}))
        sync(dev)
        start, start_cpu = time.perf_counter(), time.process_time()
        trainer.run([m.batch] * n, max_epochs=1)
        sync(dev)
        if cpu is not None:
            cpu.append((time.process_time() - start_cpu) / n)
        return time.perf_counter() - start

    for m in built.values():
        m.model.to(dev)
        m.batch = {k: v.to(dev) for k, v in m.batch.items()}
    for name in methods:
        block(name, size.ft_warmup)
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    cpu_seconds: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(size.ft_rounds):
        for name in (methods if r % 2 == 0 else tuple(reversed(methods))):
            seconds[name].append(block(name, size.ft_steps, cpu_seconds[name]) / size.ft_steps)
    memory = {}
    for name in methods:
        with peak_memory(dev) as mem:
            block(name, 1)
        memory[name] = mem["mib"]

    base = statistics.median(seconds["fine-tuning"])
    rows = []
    for name in methods:
        m = built[name]
        step = statistics.median(seconds[name])
        rows.append({
            "method": name, "seconds_per_step": step, "relative": step / base,
            "cpu_seconds_per_step": statistics.median(cpu_seconds[name]),
            "seconds_rounds": seconds[name], "forward_passes": PASSES.get(name),
            "trainable_params": count_parameters(m.model, trainable_only=True),
            "total_params": count_parameters(m.model), "peak_step_mib": memory[name],
            "seq_len": int(m.batch["input_ids"].shape[1]),
            "batch_size": int(m.batch["input_ids"].shape[0]),
            "precision": str(amp).removeprefix("torch.") if amp else "fp32",
            # counted for plain fine-tuning only: the other methods change the work per step
            "flops_per_step": (finetune_flops_per_step(m.model.config, *m.batch["input_ids"].shape,
                                                       num_labels=len(LABEL_NAMES))
                               if name == "fine-tuning" else None),
        })
    return rows
