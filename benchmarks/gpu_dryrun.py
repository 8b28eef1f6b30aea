"""The gpu scale exercised on the CPU (issue 63, item 2): every notebook's heaviest training step
at the gpu scale's shapes, and its peak GPU memory against a T4.

    python -m benchmarks.gpu_dryrun                 # all 17 notebooks (a few minutes, 2 cores)
    python -m benchmarks.gpu_dryrun --only 01 14    # some of them
    python -m benchmarks.gpu_dryrun --write         # benchmarks/results/gpu_dryrun.{json,md}

For each notebook: its settings at the gpu scale (``XSettings.at("gpu")``, which is also checked to
build), its model(s) at the gpu scale's sizes with random weights (ours from
``PretrainingSettings.at("gpu").model``; MiniLM and SmolLM2-135M from their offline configurations;
a Hub-only model from a committed configuration under ``benchmarks/configs/``), one fp16 step
with the gradient scaler (the T4's precision path, at batch 1 and 8 tokens: fp16 matmuls are ~30
times slower than fp32 on this CPU), then the peak memory of a bf16 step (the same bytes as fp16)
at the gpu batch and sequence length (:mod:`benchmarks.gpu_memory`: measured at two small batches,
extrapolated). Sequence lengths are the longest training input the notebook can see: the
setting's ``max_len`` where one caps it, else the longest example of the task's train split under
the backbone's tokenizer (MiniLM's WordPiece standing in for ours, whose gpu tokenizer exists only
after 01 ran), capped by the backbone's limit. What each workload assumes beyond the settings is in
its ``note``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from benchmarks import gpu_memory as gm
from tutorial_lib import backbones, data, tasks
from tutorial_lib.methods import NOTEBOOK_SETTINGS
from tutorial_lib.models import Output, SelfAttention, TransformerClassifier, TransformerLM, count_parameters
from tutorial_lib.pretraining_settings import PretrainingSettings
from tutorial_lib.runtime import _cpu_name
from tutorial_lib.settings import Settings

OUT = gm.REPO / "benchmarks" / "results"
CONFIGS = gm.REPO / "benchmarks" / "configs"
GPU = "gpu"


# --- the models, at the gpu scale's sizes, random weights -----------------------------------------

def ours_config(causal: bool = True):
    import dataclasses
    return dataclasses.replace(PretrainingSettings.at(GPU).model, causal=causal)


@functools.cache
def hf_config(name: str):
    """A Hugging Face configuration without the Hub: the offline packages' (MiniLM, SmolLM2) or a
    committed one (``benchmarks/configs/<last part of the id>.json``)."""
    committed = CONFIGS / f"{name.split('/')[-1]}.json"
    if committed.exists():
        return AutoConfig.from_pretrained(committed)
    return AutoConfig.from_pretrained(backbones.model_path(name, weights=False))


@functools.cache
def tokenizer(name: str):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(backbones.model_path(name, weights=False))


class TokenHead(nn.Module):
    """An encoder + a per-token linear head (NER's tags; QA's start/end: 2 outputs)."""

    def __init__(self, encoder: nn.Module, outputs: int):
        super().__init__()
        self.encoder, self.head = encoder, nn.Linear(encoder.config.hidden_size, outputs)

    def forward(self, input_ids, attention_mask, labels):
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self.head(h)
        return Output(logits, nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten()))


def flash_attention(model: nn.Module) -> nn.Module:
    """Attention dropout off, so that the CPU takes its flash kernel: on a GPU the flash kernel
    applies dropout from its random seed and keeps no mask, while the CPU's SDPA with dropout
    falls back to the math path, which keeps the B × heads × T × T probabilities and mask
    (01 measured 9.31 GiB with them, 5.94 without, against 6.58 GiB allocated on the H200)."""
    for module in model.modules():
        if isinstance(module, SelfAttention):
            module.dropout = 0.0
    return model


def build(kind: str, backbone: str, labels: int = 6, top_layers: int | None = None,
          lora: tuple[int, float] | None = None) -> Callable[[], nn.Module]:
    """A function that builds the model of a workload: ``kind`` lm | clf | token | encoder."""
    def make() -> nn.Module:
        model = _make()
        if kind == "encoder":  # probing: the frozen network's hidden states
            model.requires_grad_(False)
        return model

    def _make() -> nn.Module:
        if backbone in ("ours", "scratch"):
            if kind == "encoder":
                return TransformerLM(ours_config()).transformer
            if kind == "lm":
                return flash_attention(TransformerLM(ours_config()))
            if kind == "token":
                return flash_attention(TokenHead(TransformerLM(ours_config()).transformer, labels))
            return flash_attention(TransformerClassifier(ours_config(), labels))
        cfg = copy.deepcopy(hf_config(backbone))
        for name in ("attention_probs_dropout_prob", "attention_dropout"):  # see flash_attention
            if hasattr(cfg, name):
                setattr(cfg, name, 0.0)
        if kind == "lm":
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        else:
            encoder = AutoModel.from_config(cfg, dtype=torch.float32)
            causal = any(a.endswith("ForCausalLM") for a in cfg.architectures or [])
            model = (TokenHead(encoder, labels) if kind == "token" else
                     encoder if kind == "encoder" else
                     backbones.SequenceClassifier(encoder, labels, "last" if causal else "first"))
        if top_layers is not None:  # only the top layers train (16: the rest's states are cached)
            model.requires_grad_(False)
            for layer in model.model.layers[-top_layers:]:
                layer.requires_grad_(True)
            model.model.norm.requires_grad_(True)
        if lora is not None:
            from peft import LoraConfig, get_peft_model
            model = get_peft_model(model, LoraConfig(r=lora[0], lora_alpha=lora[1],
                                                     target_modules="all-linear"))
        return model
    return make


def vocab(backbone: str) -> int:
    return ours_config().vocab_size if backbone in ("ours", "scratch") else hf_config(backbone).vocab_size


def batches(backbone: str, seq_len: int, kind: str, labels: int = 6) -> Callable[[int], dict]:
    def make(rows: int) -> dict:
        g = torch.Generator().manual_seed(rows)
        ids = torch.randint(5, vocab(backbone), (rows, seq_len), generator=g)
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if kind == "lm":
            out["labels"] = ids.clone()
        elif kind == "token":
            out["labels"] = torch.randint(0, labels, (rows, seq_len), generator=g)
        elif kind == "clf":
            out["labels"] = torch.randint(0, labels, (rows,), generator=g)
        else:  # encoder: probing keeps every layer's states
            out["output_hidden_states"] = True
        return out
    return make


@functools.cache
def longest(task: str, backbone: str, cap: int) -> int:
    """The longest train input of ``task`` in tokens under ``backbone``'s tokenizer (ours: MiniLM's
    WordPiece, see the docstring), plus 2 special tokens, at most ``cap``."""
    name = "minilm" if backbone in ("ours", "scratch") else backbone
    texts = data.column(tasks.load_task(task).train, "text")
    ids = tokenizer(name)(list(texts), add_special_tokens=False)["input_ids"]
    return min(cap, max(map(len, ids)) + 2)


def limit(backbone: str) -> int:
    if backbone in ("ours", "scratch"):
        return ours_config().max_len
    return min(512, hf_config(backbone).max_position_embeddings)


# --- the workloads: each notebook's heaviest training step(s) at the gpu scale ---------------------

@dataclass
class Workload:
    name: str
    backbone: str
    kind: str  # lm | clf | token | encoder (inference: no gradients)
    rows: int  # the gpu batch, in sequences (a method that stacks views counts them all)
    seq: Callable[[], int]
    labels: int = 6
    top_layers: int | None = None
    lora: tuple[int, float] | None = None
    qlora: bool = False  # 14's QLoRA: qlora_estimate, no fp16 step (bitsandbytes needs CUDA)
    extra_copies: int = 0  # weight copies a method keeps (L2-SP's anchor, EWC's Fisher)
    note: str = ""
    probes: tuple[int, int] = (1, 2)
    make: Callable[[], nn.Module] = field(init=False)

    def __post_init__(self) -> None:
        self.make = build(self.kind, self.backbone, self.labels, self.top_layers, self.lora)


def workloads(nb: str, s: Settings) -> list[Workload]:  # noqa: C901 (one table, one branch each)
    """The training steps of notebook ``nb`` whose memory is largest, from its gpu settings."""
    W = Workload
    if nb == "01_pretraining":
        return [W("causal LM pretraining", "ours", "lm", s.batch_size, lambda: s.seq_len,
                  probes=(2, 4))]
    if nb in ("02_adaptation", "03_adapters_and_freezing", "04_gradual_unfreezing",
              "05_discriminative_lr"):
        out = [W(f"{s.backbone} full fine-tuning on {s.task}", s.backbone, "clf", s.budget.batch_size,
                 lambda: longest(s.task, s.backbone, s.budget.max_len or limit(s.backbone)),
                 probes=(2, 4))]
        if nb == "02_adaptation":
            out.append(W(f"{s.hf_backbone} fine-tuning on {s.task}", s.hf_backbone, "clf",
                         s.hf_budget.batch_size, lambda: longest(s.task, s.hf_backbone, limit(s.hf_backbone)),
                         probes=(2, 4)))
        return out
    if nb in ("06_multitask", "07_gradts"):
        cap = s.budget.max_len
        out = [W(f"{s.backbone} multitask, max_len {cap}", s.backbone, "clf", s.budget.batch_size,
                 lambda: max(longest(t, s.backbone, cap) for t in s.tasks), labels=3, probes=(2, 4))]
        if nb == "06_multitask":
            out.append(W("ours on TREC + LM loss", "ours", "lm", s.trec_budget.batch_size,
                         lambda: longest("trec", "ours", limit("ours")), probes=(2, 4),
                         note="the LM loss's vocabulary logits dominate; the head is tiny"))
        return out
    if nb == "08_tdt":
        return [W(f"TDT on {s.task}: 3 views in one forward", s.backbone, "clf", 3 * s.budget.batch_size,
                  lambda: longest(s.task, s.backbone, limit(s.backbone)), labels=2, probes=(2, 4))]
    if nb == "09_dart":
        return [W("DART, full fine-tuning + the fluency pass", s.backbone, "lm", 2 * s.batch_size,
                  lambda: min(s.max_len, max(longest(t, s.backbone, s.max_len) for t in s.tasks) + 16),
                  note="2 rows per example (template + fluency); 16 template tokens assumed")]
    if nb == "10_probing":
        return [W(f"{m}: hidden states, batch {s.batch_size}", m, "encoder", s.batch_size, lambda: 128,
                  probes=(4, 8), note="inference; 128 tokens assumed for a UD sentence")
                for m in ("ours", "minilm", "smollm2") if m in s.models][-1:]
    if nb == "11_amnesic_probing":
        return [W("hidden states, batch 64", s.backbone, "encoder", 64, lambda: 128, probes=(4, 8),
                  note="inference at amnesic.masked_positions' batch 64; 128 tokens assumed")]
    if nb == "12_adversarial_heads":
        return [W("adversarial stage, full fine-tuning", s.backbone, "token", s.stage_batch_size,
                  lambda: 128, labels=17, probes=(2, 4), note="128 tokens assumed for a UD sentence")]
    if nb == "13_forgetting_and_distillation":
        return [W(f"EWC on {s.target_task} (anchor + Fisher)", s.backbone, "clf",
                  s.target_budget.batch_size,
                  lambda: max(longest(t, s.backbone, limit(s.backbone))
                              for t in (s.source_task, s.target_task)),
                  extra_copies=2, probes=(2, 4))]
    if nb == "14_peft":
        out = [W(f"{s.backbone} full fine-tuning on {s.task}", s.backbone, "clf", s.budget.batch_size,
                 lambda: longest(s.task, s.backbone, limit(s.backbone)), probes=(2, 4))]
        if s.lm_frontier:
            out.append(W(f"{s.lm_backbone} full fine-tuning on {s.task}", s.lm_backbone, "clf",
                         s.budget.batch_size, lambda: longest(s.task, s.lm_backbone, limit(s.lm_backbone))))
        if s.qlora_backbone:  # qlora_run cuts the inputs to 126 tokens + end of text
            out.append(W(f"QLoRA {s.qlora_backbone}", s.qlora_backbone, "clf", s.budget.batch_size,
                         lambda: min(127, longest(s.task, "smollm2", 512)), qlora=True,
                         note="4-bit weights by hand; the rest measured on 1-2 layer stand-ins"))
        return out
    if nb == "15_token_tasks":
        qa = [W(f"QA {b}, windows of {s.qa_max_length}", b, "token", s.qa_budget.batch_size,
                functools.partial(lambda b: min(s.qa_max_length, limit(b)), b), labels=2, probes=(2, 4))
              for b in ("ours", "minilm")]
        return [W("NER minilm", "minilm", "token", s.hf_budget.batch_size, lambda: 128, labels=9,
                  probes=(2, 4), note="128 tokens assumed for a CoNLL sentence"), *qa]
    if nb == "16_generation_and_dialogue":
        return [W(f"double heads, top {s.trainable_layers} layers", s.backbone, "lm",
                  s.budget.batch_size * s.train_candidates, lambda: 256, top_layers=s.trainable_layers,
                  note="candidates × batch rows at dialogue_training's max_len 256")]
    if nb == "17_instruction_tuning_and_preferences":
        return [W(f"SFT LoRA r={s.lora_r}", s.backbone, "lm", s.budget.batch_size, lambda: s.budget.max_len,
                  lora=(s.lora_r, s.lora_alpha)),
                W("DPO: chosen + rejected", s.backbone, "lm", 2 * s.dpo_budget.batch_size,
                  lambda: s.dpo_budget.max_len, lora=(s.lora_r, s.lora_alpha),
                  note="the reference model's forward (no gradients) not counted")]
    if nb == "18_unlabelled_text":
        return [W("ours: the LM stage on the task's text", "ours", "lm", s.lm_budget.batch_size,
                  lambda: s.lm_seq_len, probes=(2, 4)),
                W(f"UDA {s.semi_backbone}: labelled + unlabelled clean and perturbed", s.semi_backbone,
                  "clf", s.semi_budget.batch_size * (1 + 2 * s.unlabelled_ratio),
                  lambda: longest(s.task, s.semi_backbone, limit(s.semi_backbone)), probes=(2, 4),
                  note="the clean forward keeps no activations; counted as if it did (an upper bound)")]
    raise KeyError(nb)


# --- QLoRA: a 4-bit base needs CUDA (bitsandbytes); measured on 1- and 2-layer stand-ins -----------

NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # 4 bits, an 8-bit absmax per 64, an fp32 per 256 of those


def qlora_stand_in(name: str, layers: int, labels: int, r: int, alpha: float) -> Callable[[], nn.Module]:
    """``qlora_classifier``'s model with ``layers`` layers and fp32 weights for bitsandbytes' 4-bit
    ones: LoRA on every linear layer of the base, gradient checkpointing as
    ``prepare_model_for_kbit_training`` turns it on, a classifier on the last token."""
    def make() -> nn.Module:
        from peft import LoraConfig, get_peft_model
        cfg = copy.deepcopy(hf_config(name))
        cfg.num_hidden_layers = layers
        base = AutoModel.from_config(cfg, dtype=torch.float32)
        base.requires_grad_(False)
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        base.enable_input_require_grads()
        encoder = get_peft_model(base, LoraConfig(task_type="FEATURE_EXTRACTION", r=r, lora_alpha=alpha,
                                                  target_modules="all-linear"))
        return backbones.SequenceClassifier(encoder, labels, "last")
    return make


def qlora_estimate(name: str, rows: int, seq: int, labels: int = 6, r: int = 8,
                   alpha: float = 16.0) -> dict:
    """The peak of QLoRA's training step: everything but the frozen weights measured on 1- and
    2-layer stand-ins and extrapolated in the layers and the batch; the frozen weights counted by
    hand (linear layers in NF4 with double quantisation, the rest fp32 as
    ``prepare_model_for_kbit_training`` leaves them)."""
    layers = hf_config(name).num_hidden_layers
    per_depth = []
    for depth in (1, 2):
        make = qlora_stand_in(name, depth, labels, r, alpha)
        est = gm.estimate(make, batches(name, seq, "clf", labels), rows, probes=(1, 2))
        per_depth.append(est["allocated_gib"] - est["parts_gib"].get("Parameter", 0.0))
    with torch.device("meta"):
        full = qlora_stand_in(name, layers, labels, r, alpha)()
    linear = sum(m.weight.numel() for n, m in full.named_modules()
                 if isinstance(m, nn.Linear) and "lora_" not in n and n != "head")
    total = count_parameters(full)
    trained = count_parameters(full, trainable_only=True)
    weights = (linear * NF4_BYTES + (total - linear) * 4) / gm.GIB
    allocated = per_depth[0] + (layers - 1) * (per_depth[1] - per_depth[0]) + weights
    return {"params": total, "trainable": trained, "allocated_gib": allocated,
            "reserved_gib": allocated * gm.RESERVE, "weights_gib": round(weights, 3),
            "per_depth_gib": [round(x, 3) for x in per_depth]}


# --- running them ----------------------------------------------------------------------------------

def fp16_step(w: Workload) -> None:
    """One training step with fp16 autocast and the gradient scaler (a T4's path), tiny batch."""
    from tutorial_lib.training import create_trainer
    model = w.make()
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        return
    trainer = create_trainer(model, torch.optim.AdamW(trainable, lr=1e-4), device=torch.device("cpu"),
                             amp_dtype=torch.float16)
    assert trainer.grad_scaler is not None
    trainer.run([batches(w.backbone, 8, w.kind, w.labels)(1)], max_epochs=1)


def run_workload(w: Workload) -> dict:
    start = time.perf_counter()
    row = {"workload": w.name, "backbone": w.backbone, "rows": w.rows, "note": w.note}
    try:
        seq = w.seq()
        row["seq_len"] = seq
        if w.qlora:
            est = qlora_estimate(w.backbone, w.rows, seq, w.labels)
            row.update(est, status="ran", fits_t4=gm.fits(est["reserved_gib"]),
                       seconds=round(time.perf_counter() - start, 1))
            return row
        model = w.make()
        row["params"] = count_parameters(model)
        row["trainable"] = count_parameters(model, trainable_only=True)
        del model
        if w.kind != "encoder":
            fp16_step(w)
        est = gm.estimate(w.make, batches(w.backbone, seq, w.kind, w.labels), w.rows, probes=w.probes,
                          extra_bytes=w.extra_copies * 4 * row["params"])
        row.update(est, status="ran", fits_t4=gm.fits(est["reserved_gib"]))
    except Exception as err:  # noqa: BLE001 (the dry run reports every failure and goes on)
        tb = traceback.extract_tb(err.__traceback__)[-1]
        row.update(status="failed", error=f"{type(err).__name__}: {err}"[:400],
                   where=f"{Path(tb.filename).name}:{tb.lineno}")
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run(only: list[str] | None = None) -> dict:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    classes = sorted(((c.notebook, c) for c in (PretrainingSettings, *NOTEBOOK_SETTINGS)), key=lambda x: x[0])
    out = {}
    for nb, cls in dict(classes).items():
        if only and not any(nb.startswith(o) for o in only):
            continue
        start = time.perf_counter()
        try:
            s = cls.at(GPU)
            rows = [run_workload(w) for w in workloads(nb, s)]
        except Exception as err:  # noqa: BLE001
            rows = [{"workload": "settings", "status": "failed", "error": f"{type(err).__name__}: {err}"}]
        ran = [r for r in rows if r["status"] == "ran"]
        worst = max(ran, key=lambda r: r["reserved_gib"]) if ran else None
        out[nb] = {"status": "ran" if len(ran) == len(rows) else "failed", "workloads": rows,
                   "params": max((r.get("params", 0) for r in rows), default=0),
                   "reserved_gib": worst["reserved_gib"] if worst else None,
                   "allocated_gib": worst["allocated_gib"] if worst else None,
                   "fits_t4": all(r.get("fits_t4", False) for r in rows),
                   "seconds": round(time.perf_counter() - start, 1)}
        print(f"{nb:<40} {out[nb]['status']:<7} {out[nb]['params'] / 1e6:7.1f}M "
              f"{out[nb]['reserved_gib'] or float('nan'):6.2f} GiB  {out[nb]['seconds']:6.1f} s", flush=True)
    return out


def check_01(result: dict) -> dict:
    """01's estimate against its measured run (results/gpu/peak_memory.json)."""
    est = result["01_pretraining"]["workloads"][0]
    meas = gm.MEASURED_01
    return {"estimated_allocated_gib": round(est["allocated_gib"], 2),
            "measured_allocated_gib": round(meas["allocated_gib"], 2),
            "allocated_ratio": round(est["allocated_gib"] / meas["allocated_gib"], 3),
            "estimated_reserved_gib": round(est["reserved_gib"], 2),
            "measured_reserved_gib": round(meas["reserved_gib"], 2),
            "raw_allocated_vs_reserved": round(est["allocated_gib"] / meas["reserved_gib"], 3)}


def markdown(doc: dict) -> str:
    lines = [f"Dry run of the gpu scale on the CPU ({doc['hardware']}, {doc['date']}, "
             f"{doc['seconds']:.0f} s; `python -m benchmarks.gpu_dryrun --write`). Peak GPU memory of "
             "each notebook's heaviest training step at the gpu batch and sequence length, fp16/bf16 "
             f"autocast with fp32 weights and AdamW: the tensors (allocated) and × {gm.RESERVE:.2f} for "
             f"the caching allocator (reserved), against a T4's {gm.T4_USABLE_GIB:g} GiB.", "",
             "| notebook | workload | ran | params | batch × tokens | allocated GiB | reserved GiB | T4 |",
             "|---|---|---|---|---|---|---|---|"]
    for nb, r in doc["notebooks"].items():
        for w in r["workloads"]:
            if w["status"] != "ran":
                lines.append(f"| {nb} | {w['workload']} | failed: {w.get('where', '')} "
                             f"`{w.get('error', '')[:120]}` | | | | | |")
                continue
            lines.append(f"| {nb} | {w['workload']} | ran | {w['params'] / 1e6:.1f}M "
                         f"({w['trainable'] / 1e6:.1f}M trained) | {w['rows']} × {w['seq_len']} | "
                         f"{w['allocated_gib']:.2f} | {w['reserved_gib']:.2f} | "
                         f"{'fits' if w['fits_t4'] else '**does not fit**'} |")
    c = doc.get("check_01")
    if c:
        lines += ["", f"01 check: estimated {c['estimated_allocated_gib']} GiB allocated "
                      f"(measured {c['measured_allocated_gib']}, ratio {c['allocated_ratio']}); "
                      f"{c['estimated_reserved_gib']} GiB reserved (measured {c['measured_reserved_gib']})."]
    return "\n".join(lines) + "\n"


DOC = gm.REPO / "docs" / "gpu.md"
MARKERS = ("<!-- gpu-dryrun: start -->", "<!-- gpu-dryrun: end -->")


def write_doc(table: str, doc: Path = DOC) -> None:
    """Put ``table`` between docs/gpu.md's markers (the section that includes the dry run's table)."""
    text = doc.read_text()
    head, rest = text.split(MARKERS[0], 1)
    tail = rest.split(MARKERS[1], 1)[1]
    doc.write_text(f"{head}{MARKERS[0]}\n{table}{MARKERS[1]}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="notebook numbers, e.g. 01 14")
    parser.add_argument("--write", action="store_true", help="write benchmarks/results/gpu_dryrun.*")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = run(args.only)
    doc = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "hardware": f"{_cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
                       f"{platform.python_version()}",
           "seconds": round(time.perf_counter() - start, 1), "reserve": round(gm.RESERVE, 3),
           "t4_usable_gib": gm.T4_USABLE_GIB, "notebooks": result}
    if "01_pretraining" in result and result["01_pretraining"]["status"] == "ran":
        doc["check_01"] = check_01(result)
        print("01:", doc["check_01"])
    if args.write:
        OUT.mkdir(exist_ok=True)
        path = OUT / "gpu_dryrun.json"
        if args.only and path.exists():  # a notebook added or re-run: merged into the full table
            old = json.loads(path.read_text())
            old["notebooks"] = dict(sorted({**old["notebooks"], **result}.items()))
            old.setdefault("added", []).append({"notebooks": sorted(result), "date": doc["date"],
                                                "seconds": doc["seconds"]})
            doc = old
        path.write_text(json.dumps(doc, indent=1) + "\n")
        (OUT / "gpu_dryrun.md").write_text(markdown(doc))
        if not args.only or set(doc["notebooks"]) >= {c.notebook for c in NOTEBOOK_SETTINGS}:
            write_doc(markdown(doc))


if __name__ == "__main__":
    main()
