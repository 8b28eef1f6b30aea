"""Decoding: how a language model's next-token distribution becomes text, and how to measure it.

Each strategy is a *picker*: a few lines that turn the logits of the next token ``[B, V]`` into
token ids ``[B]``. :func:`generate` runs any picker left to right with the model's key/value
cache; :func:`beam_search` keeps the ``num_beams`` best partial sequences instead of one.

* **greedy** — the most probable token, every time;
* **temperature** — sample from softmax(logits / T): T < 1 sharpens, T > 1 flattens;
* **top-k** — sample among the k most probable tokens only (Fan et al. 2018);
* **nucleus / top-p** — sample among the smallest set of tokens whose probability adds up to p
  (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration").

Our pickers make the same choices as ``transformers``' ``generate``: greedy is an argmax, and the
samplers filter the logits as its temperature → top-k → top-p processors do, then draw one token
with ``torch.multinomial`` on the softmax, from the global torch generator — so after the same
``torch.manual_seed`` both draw the same tokens (``tests/methods/generation/test_decoding.py`` checks it).

Metrics of the generated text (what Holtzman et al. measure): :func:`repetition` (the share of a
text's n-grams that repeat an earlier one, Welleck et al. 2020's seq-rep-n), :func:`distinct_n`
over a set of texts (Li et al. 2016), and the model's own perplexity of what it generated
(:func:`continuation_nll`); :func:`mean_interval` puts a 95 % interval over prompts on each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats as sps

from ...anatomy import anatomy
from ...stats import ALPHA

Picker = Callable[[torch.Tensor], torch.Tensor]  # next-token logits [B, V] -> token ids [B]
Forward = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any]]  # (new ids, cache) -> (logits, cache)

# --- the strategies ----------------------------------------------------------------------------


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most probable next token."""
    return logits.argmax(dim=-1)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Logits with everything below the k-th largest set to -inf (ties with it are kept)."""
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, -math.inf)


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Logits outside the nucleus set to -inf: the smallest set of most probable tokens whose
    probability reaches p (the most probable token always stays)."""
    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, -math.inf)


def sample(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Draw the next token from softmax(logits / temperature), restricted to the top k and/or the
    nucleus p (in that order, as ``generate`` does)."""
    logits = logits / temperature
    if top_k:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(logits.softmax(dim=-1), num_samples=1).squeeze(-1)


@dataclass(frozen=True)
class Strategy:
    """A decoding strategy by name and settings: ``picker()`` for :func:`generate`, ``hf_kwargs()``
    for ``transformers``' ``generate`` (the same choices)."""

    name: str
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    num_beams: int = 1

    def picker(self) -> Picker:
        if self.name in ("greedy", "beam"):
            return greedy
        return lambda logits: sample(logits, self.temperature, self.top_k, self.top_p)

    def hf_kwargs(self) -> dict[str, Any]:
        if self.name in ("greedy", "beam"):
            return {"do_sample": False, "num_beams": self.num_beams}
        return {"do_sample": True, "temperature": self.temperature, "top_k": self.top_k or 0,
                "top_p": 1.0 if self.top_p is None else self.top_p, "num_beams": 1}


STRATEGIES = {
    "greedy": Strategy("greedy"),
    "beam (4)": Strategy("beam", num_beams=4),
    "pure sampling": Strategy("sample"),
    "temperature 0.7": Strategy("sample", temperature=0.7),
    "top-k 40": Strategy("sample", top_k=40),
    "nucleus 0.95": Strategy("sample", top_p=0.95),
}
"""The strategies Holtzman et al. (2020) compare (their Table 1 uses k = 40 and p = 0.95)."""

# --- running a strategy ------------------------------------------------------------------------


def lm_forward(model: torch.nn.Module) -> Forward:
    """The step of a Hugging Face causal LM: new ids + cache -> last position's logits + cache."""

    def forward(ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        return out.logits[:, -1].float(), out.past_key_values

    return forward


def history_forward(model: torch.nn.Module) -> Forward:
    """The step of a causal LM without a key/value cache (ours, notebook 01): the "cache" is the
    ids so far, and every step re-reads them (the last ``config.max_len``) — slower, the same
    tokens."""
    max_len = getattr(model.config, "max_len", None)

    def forward(ids: torch.Tensor, cache: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        seq = ids if cache is None else torch.cat([cache, ids], dim=1)
        window = seq[:, -max_len:] if max_len else seq
        return model(input_ids=window).logits[:, -1].float(), seq

    return forward


def as_forward(model: torch.nn.Module | Forward) -> Forward:
    """``model``'s step: a :data:`Forward` as is, an LM whose family decodes with a key/value cache
    (``anatomy(model).cached_decoding``: Hugging Face's llama family) with it (:func:`lm_forward`),
    ours on its history (:func:`history_forward`)."""
    if not isinstance(model, torch.nn.Module):
        return model
    return lm_forward(model) if anatomy(model).cached_decoding else history_forward(model)


@torch.no_grad()
def generate(
    model: torch.nn.Module | Forward, prompt: torch.Tensor, pick: Picker, max_new_tokens: int,
    eos_id: int | None = None,
) -> torch.Tensor:
    """``prompt`` [1, T] continued by up to ``max_new_tokens`` tokens chosen by ``pick``; stops
    after ``eos_id``. ``model``: a causal LM, or a :data:`Forward` step (e.g. one that adds
    segment embeddings). Returns the new tokens, [1, n]."""
    forward = as_forward(model)
    logits, cache = forward(prompt, None)
    new = []
    for _ in range(max_new_tokens):
        token = pick(logits)  # [1]
        new.append(token)
        if eos_id is not None and int(token) == eos_id:
            break
        logits, cache = forward(token[:, None], cache)
    return torch.stack(new, dim=1)


@torch.no_grad()
def beam_search(
    model: torch.nn.Module | Forward, prompt: torch.Tensor, num_beams: int, max_new_tokens: int
) -> torch.Tensor:
    """The most probable continuation found by keeping the ``num_beams`` best partial ones (by
    summed log-probability) at every step; [1, n]. No early stop at end-of-text: every beam runs
    ``max_new_tokens`` steps, so no length penalty is needed to compare them."""
    forward = as_forward(model)
    logits, cache = forward(prompt, None)
    beams = torch.empty(1, 0, dtype=torch.long)  # [beams, t]: one beam to start
    scores = torch.zeros(1)  # summed log-probabilities of the beams
    for _ in range(max_new_tokens):
        total = scores[:, None] + logits.log_softmax(dim=-1)  # [beams, V]
        scores, flat = total.view(-1).topk(min(num_beams, total.numel()))
        parent, token = flat // total.shape[-1], flat % total.shape[-1]
        beams = torch.cat([beams[parent], token[:, None]], dim=1)
        cache = reorder(cache, parent)
        logits, cache = forward(token[:, None], cache)
    return beams[:1]


def reorder(cache: Any, parent: torch.Tensor) -> Any:
    """The cache rows of the surviving beams' parents (the first step fans out from one row)."""
    if isinstance(cache, torch.Tensor):  # history_forward's ids
        return cache[parent]
    if hasattr(cache, "reorder_cache"):
        cache.reorder_cache(parent)
        return cache
    return tuple(tuple(t[parent] for t in layer) for layer in cache)


def decode(
    model: torch.nn.Module, prompt: torch.Tensor, strategy: Strategy, max_new_tokens: int,
    eos_id: int | None = None,
) -> torch.Tensor:
    """Our implementation of ``strategy`` on ``prompt`` [1, T]: the new tokens [1, n]."""
    if strategy.num_beams > 1:
        return beam_search(model, prompt, strategy.num_beams, max_new_tokens)
    return generate(model, prompt, strategy.picker(), max_new_tokens, eos_id)


# --- metrics -----------------------------------------------------------------------------------


def ngrams(tokens: Sequence[Hashable], n: int) -> list[tuple]:
    """The n-grams of a token sequence, in order."""
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def repetition(tokens: Sequence[Hashable], n: int = 4) -> float:
    """Share of a text's n-grams that repeat an n-gram seen earlier in the same text:
    1 − unique / total (0 = no repeats; nan for a text shorter than n)."""
    grams = ngrams(tokens, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else math.nan


def distinct_n(texts: Sequence[Sequence[Hashable]], n: int = 2) -> float:
    """Distinct n-grams over a set of texts / all n-grams of them (1 = never the same twice)."""
    grams = [g for tokens in texts for g in ngrams(tokens, n)]
    return len(set(grams)) / len(grams) if grams else math.nan


@torch.no_grad()
def continuation_nll(
    model: torch.nn.Module, prompt: torch.Tensor, continuation: torch.Tensor
) -> tuple[float, int]:
    """The model's total negative log-likelihood (nats) of ``continuation`` [1, n] after ``prompt``
    [1, T], and n: its own perplexity of the text is exp(nll / n)."""
    ids = torch.cat([prompt, continuation], dim=1)
    logits = model(input_ids=ids).logits[:, prompt.shape[1] - 1: -1].float()
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), continuation.reshape(-1), reduction="sum")
    return float(nll), continuation.shape[1]


@dataclass(frozen=True)
class Interval:
    """A mean over items (prompts) with its 95 % confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}] (n = {self.n})"


def mean_interval(values: Sequence[float], method: str = "t", seed: int = 0) -> Interval:
    """Mean of per-prompt values (nan dropped) with a 95 % interval: Student's t (``"t"``) or a
    percentile bootstrap over prompts (``"bootstrap"``, 10,000 resamples, ``seed``)."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    if len(v) < 2:
        raise ValueError(f"an interval needs at least 2 values, got {len(v)}")
    if v.std() == 0:  # every prompt the same: no spread to put an interval on
        return Interval(float(v[0]), float(v[0]), float(v[0]), len(v))
    if method == "t":
        ci = sps.ttest_1samp(v, 0.0).confidence_interval(1 - ALPHA)
    elif method == "bootstrap":
        ci = sps.bootstrap((v,), np.mean, confidence_level=1 - ALPHA, n_resamples=10_000,
                           method="percentile", rng=np.random.default_rng(seed)).confidence_interval
    else:
        raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")
    return Interval(float(v.mean()), float(ci.low), float(ci.high), len(v))


# --- prompts, the production path, and a table of texts ------------------------------------------

WIKITEXT_MARKUP = (("@-@", "-"), ("@,@", ","), ("@.@", "."))


def detokenize(text: str) -> str:
    """WikiText's tokenised text back to plain text (``1 @,@ 000`` → ``1,000``, ``word ,`` → ``word,``)."""
    text = text.strip()
    for old, new in WIKITEXT_MARKUP:
        text = text.replace(f" {old} ", new)
    text = re.sub(r" ([.,;:!?)]|'s\b)", r"\1", text)
    return text.replace("( ", "(")


def text_prompts(
    texts: Sequence[str], tokenizer: Any, n: int, prompt_tokens: int, continuation_tokens: int,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random paragraphs (no headings, no ``<unk>``, long enough), each cut into its first
    ``prompt_tokens`` tokens and the next ``continuation_tokens`` (the human continuation):
    two ``[n, T]`` tensors (equal lengths: a batch needs no padding)."""
    need = prompt_tokens + continuation_tokens
    rows = []
    for text in texts:
        text = text.strip()
        if text and not text.startswith("=") and "<unk>" not in text:
            ids = tokenizer(detokenize(text), add_special_tokens=False)["input_ids"]
            if len(ids) >= need:
                rows.append(ids[:need])
    if len(rows) < n:
        raise ValueError(f"only {len(rows)} paragraphs have {need} tokens; ask for fewer prompts or tokens")
    chosen = torch.tensor(np.random.default_rng(seed).choice(len(rows), n, replace=False))
    ids = torch.tensor(rows)[chosen]
    return ids[:, :prompt_tokens], ids[:, prompt_tokens:]


@torch.no_grad()
def hf_generate(
    model: torch.nn.Module, prompts: torch.Tensor, strategy: Strategy, new_tokens: int, batch_size: int = 16,
) -> torch.Tensor:
    """``transformers``' ``generate`` on ``[P, T]`` prompts of one length, ``batch_size`` at a time:
    exactly ``new_tokens`` tokens each (``min_new_tokens``: end-of-text cannot end a text early,
    so every strategy is measured on texts of one length). ``[P, new_tokens]``."""
    pad = model.generation_config.pad_token_id
    pad = pad if pad is not None else model.generation_config.eos_token_id
    out = []
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i:i + batch_size]
        ids = model.generate(chunk, attention_mask=torch.ones_like(chunk), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, pad_token_id=pad, **strategy.hf_kwargs())
        out.append(ids[:, chunk.shape[1]:])
    return torch.cat(out)


def generate_texts(
    model: torch.nn.Module, prompts: torch.Tensor, strategy: Strategy, new_tokens: int, batch_size: int = 16,
) -> torch.Tensor:
    """``[P, new_tokens]``: :func:`hf_generate` for a family with Hugging Face's ``generate``
    (``anatomy(model).cached_decoding``), our :func:`decode` prompt by prompt for ours; no early stop
    in either."""
    if anatomy(model).cached_decoding:
        return hf_generate(model, prompts, strategy, new_tokens, batch_size)
    return torch.cat([decode(model, p[None], strategy, new_tokens) for p in prompts])


def text_rows(
    model: torch.nn.Module, prompts: torch.Tensor, texts: torch.Tensor, name: str, n: int = 4,
) -> list[dict]:
    """One row per text (``texts[i]`` continues ``prompts[i]``): ``repetition`` (n-grams),
    ``distinct_1`` (unique tokens / tokens) and the model's own ``nll`` per token and
    ``perplexity`` of it."""
    rows = []
    for i, (prompt, text) in enumerate(zip(prompts, texts)):
        nll, k = continuation_nll(model, prompt[None], text[None])
        tokens = text.tolist()
        rows.append({"strategy": name, "prompt": i, "repetition": repetition(tokens, n),
                     "distinct_1": len(set(tokens)) / len(tokens), "nll": nll / k,
                     "perplexity": math.exp(nll / k)})
    return rows


HOLTZMAN_TABLE_1 = (
    {"strategy": "human", "perplexity": 12.38, "repetition (%)": 0.28},
    {"strategy": "greedy", "perplexity": 1.50, "repetition (%)": 73.66},
    {"strategy": "beam (16)", "perplexity": 1.48, "repetition (%)": 28.94},
    {"strategy": "pure sampling", "perplexity": 22.73, "repetition (%)": 0.22},
    {"strategy": "temperature 0.9", "perplexity": 10.25, "repetition (%)": 0.66},
    {"strategy": "top-k 40", "perplexity": 6.88, "repetition (%)": 0.78},
    {"strategy": "nucleus 0.95", "perplexity": 13.13, "repetition (%)": 0.36},
)
"""Holtzman et al. (2020), Table 1 (GPT-2 large, WebText prompts, 200 tokens) — recalled, not
checked against the paper. Their repetition is the share of *texts* that end in a repeating loop,
not our share of repeated n-grams: compare the ordering, not the values."""
