"""Parameter-efficient fine-tuning: which few parameters a method adds or trains, and how many.

Each method is a small frozen description (:class:`LoRA`, :class:`IA3`, :class:`PromptTuning`,
:class:`PrefixTuning`, :class:`BitFit`, :class:`Houlsby`, :class:`Full`) with

* ``apply(model)`` — change a classifier (``model.encoder`` a Hugging Face BERT or Llama model,
  ``model.head`` its linear head) in place: add the method's parameters, freeze everything else,
  keep the classification head trainable;
* ``expected_trainable(model)`` — the trained-parameter count *by formula*, read off the
  unadapted model's shapes (call it before ``apply``), to check against the model's actual count.

The methods the 🤗 ``peft`` library has are applied with it, to the encoder (the head stays ours,
outside peft): LoRA (Hu et al. 2021), (IA)³ (Liu et al. 2022), prompt tuning (Lester et al.
2021), prefix tuning (Li & Liang 2021) / P-tuning v2 (Liu et al. 2022). BitFit (Ben Zaken et al.
2022) is a freezing rule; ``LoRA(ours=True)`` applies our few-line LoRA (:mod:`.lora`) instead
of peft's; :class:`Houlsby` our adapters of notebook 03 (:mod:`.adapters`). Saving, reloading,
merging and the costs are in :mod:`.peft_checks`.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
from peft import IA3Config, LoraConfig, PeftModel, PrefixTuningConfig, PromptTuningConfig, get_peft_model
from torch import nn

from ...params import decay_groups, freeze, unfreeze
from .adapters import add_adapters, freeze_for_adapters
from .lora import add_lora


class PeftMethodError(ValueError):
    """A method that cannot be applied to this model, with what to do instead."""


# where each method goes, per model family (regexes over the encoder's module names, full match)
TARGETS = {
    "bert": {"lora": r".*\.attention\.self\.(query|value)",  # W_q, W_v as Hu et al.
             "ia3_kv": r".*\.attention\.self\.(key|value)",  # rescale keys and values
             "ia3_ff": r".*\.layer\.\d+\.output\.dense"},  # rescale the inner FF activation
    "llama": {"lora": r".*\.self_attn\.(q_proj|v_proj)",
              "ia3_kv": r".*\.self_attn\.(k_proj|v_proj)",
              "ia3_ff": r".*\.mlp\.down_proj"},
}
TARGETS["roberta"] = TARGETS["bert"]  # the same module names (the paper scale's RoBERTa)


def family(model: nn.Module) -> str:
    """``"bert"`` or ``"llama"``: the model type of the classifier's encoder."""
    kind = getattr(_config(model), "model_type", None)
    if kind not in TARGETS:
        raise PeftMethodError(f"no default targets for a {kind!r} encoder: give the method its "
                              "targets (regexes over module names: LoRA(targets=...), IA3(kv_targets"
                              f"=..., ff_targets=...)) or use a model of one of {sorted(TARGETS)}")
    return kind


def _config(model: nn.Module):
    return model.encoder.config


def _kv_width(model: nn.Module) -> int:
    """Width of one layer's keys (= values): fewer than d_model under grouped-query attention."""
    cfg = _config(model)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return heads * head_dim


def _linears(model: nn.Module, pattern: str) -> list[nn.Linear]:
    found = [m for name, m in model.encoder.named_modules()
             if isinstance(m, nn.Linear) and re.fullmatch(pattern, name)]
    if not found:
        raise PeftMethodError(f"target pattern {pattern!r} matches no linear layer of the encoder")
    return found


def head_count(model: nn.Module) -> int:
    """The classification head (d + 1)·k: trained by every method."""
    return sum(p.numel() for p in model.head.parameters())


def _keep_head_trainable(model: nn.Module) -> nn.Module:
    unfreeze(model, model.head)
    return model


# --- the methods ---------------------------------------------------------------------------------


class PromptedEncoder(nn.Module):
    """A prompt-tuned encoder whose outputs at the virtual tokens are cut off again, so the
    classifier pools the same position (BERT's [CLS], a causal LM's last token) as before."""

    def __init__(self, peft_model: PeftModel, n_virtual: int):
        super().__init__()
        self.peft_model, self.n_virtual = peft_model, n_virtual
        self.config = peft_model.config

    def get_input_embeddings(self) -> nn.Module:
        return self.peft_model.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kw):
        out = self.peft_model(input_ids=input_ids, attention_mask=attention_mask, **kw)
        out.last_hidden_state = out.last_hidden_state[:, self.n_virtual:]
        if getattr(out, "hidden_states", None) is not None:
            out.hidden_states = tuple(h[:, self.n_virtual:] for h in out.hidden_states)
        return out


@contextlib.contextmanager
def peft_quietly() -> Iterator[None]:
    """Hide one warning peft 0.21 triggers in transformers 5 on every wrap (it reads the
    deprecated ``is_gradient_checkpointing``); nothing for a learner to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*is_gradient_checkpointing", FutureWarning)
        yield


def peft_model_of(model: nn.Module) -> PeftModel | None:
    """The peft model inside a classifier's encoder slot, or None (a method of our own)."""
    enc = model.encoder
    enc = enc.peft_model if isinstance(enc, PromptedEncoder) else enc
    return enc if isinstance(enc, PeftModel) else None


@dataclass(frozen=True)
class PeftMethod:
    """What a parameter-efficient method changes; subclasses say how."""

    label: ClassVar[str] = ""
    mergeable: ClassVar[bool] = False  # can its change be folded into the base weights?
    exact_reload: ClassVar[bool] = True  # does a reload compute with the very tensors trained?

    def apply(self, model: nn.Module) -> nn.Module:
        raise NotImplementedError

    def expected_trainable(self, model: nn.Module) -> int:
        """Trained parameters by formula (from the unadapted model), head included."""
        raise NotImplementedError


@dataclass(frozen=True)
class ViaPeft(PeftMethod):
    """A method 🤗 peft implements: ``apply`` wraps the encoder in a ``PeftModel``."""

    def peft_config(self, model: nn.Module) -> object:
        raise NotImplementedError

    def apply(self, model: nn.Module) -> nn.Module:
        with peft_quietly():
            model.encoder = get_peft_model(model.encoder, self.peft_config(model))
        return _keep_head_trainable(model)


@dataclass(frozen=True)
class LoRA(ViaPeft):
    """h = W x + (α/r)·B A x on the attention's query and value projections; B = 0 at init.
    ``ours=True``: our :class:`LoRALinear` instead of peft's (same function, same count)."""

    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: str | None = None  # regex over encoder module names; default TARGETS[family]["lora"]
    ours: bool = False
    label: ClassVar[str] = "LoRA"
    mergeable: ClassVar[bool] = True

    def pattern(self, model: nn.Module) -> str:
        return self.targets or TARGETS[family(model)]["lora"]

    def peft_config(self, model: nn.Module) -> LoraConfig:
        return LoraConfig(task_type="FEATURE_EXTRACTION", r=self.r, lora_alpha=self.alpha,
                          lora_dropout=self.dropout, target_modules=self.pattern(model))

    def apply(self, model: nn.Module) -> nn.Module:
        if self.ours:
            if self.dropout:
                raise PeftMethodError("our LoRALinear has no dropout: use ours=False for dropout")
            add_lora(model, self.r, self.alpha, self.pattern(model))
            return model
        return super().apply(model)

    def expected_trainable(self, model: nn.Module) -> int:
        # r·(d_in + d_out) per adapted matrix
        mats = _linears(model, self.pattern(model))
        return sum(self.r * (m.in_features + m.out_features) for m in mats) + head_count(model)


@dataclass(frozen=True)
class IA3(ViaPeft):
    """(IA)³: learned vectors l_k, l_v, l_ff (initialised to 1) that rescale the attention's keys
    and values and the feed-forward's inner activation: k ← l_k ⊙ k, v ← l_v ⊙ v,
    FF(x) = (l_ff ⊙ γ(W₁x)) W₂."""

    kv_targets: str | None = None  # regexes; default TARGETS[family]["ia3_kv"] and ["ia3_ff"]
    ff_targets: str | None = None
    label: ClassVar[str] = "(IA)³"
    mergeable: ClassVar[bool] = True

    def patterns(self, model: nn.Module) -> tuple[str, str]:
        if self.kv_targets and self.ff_targets:
            return self.kv_targets, self.ff_targets
        t = TARGETS[family(model)]
        return self.kv_targets or t["ia3_kv"], self.ff_targets or t["ia3_ff"]

    def peft_config(self, model: nn.Module) -> IA3Config:
        kv, ff = self.patterns(model)
        return IA3Config(task_type="FEATURE_EXTRACTION", target_modules=f"{kv}|{ff}",
                         feedforward_modules=ff)

    def expected_trainable(self, model: nn.Module) -> int:
        kv, ff = self.patterns(model)
        keys_values = sum(m.out_features for m in _linears(model, kv))  # d_k + d_v per layer
        inner = sum(m.in_features for m in _linears(model, ff))  # d_ff per layer
        return keys_values + inner + head_count(model)


@dataclass(frozen=True)
class PromptTuning(ViaPeft):
    """n learned input vectors ("soft prompt") prepended to the token embeddings; nothing else
    of the encoder changes. ``init="SAMPLE_VOCAB"``: start from embeddings of random tokens
    (Lester et al. sample the 5,000 most common; peft samples the whole vocabulary)."""

    n_tokens: int = 20
    init: str = "SAMPLE_VOCAB"  # or "RANDOM"
    label: ClassVar[str] = "prompt tuning"

    def peft_config(self, model: nn.Module) -> PromptTuningConfig:
        return PromptTuningConfig(task_type="FEATURE_EXTRACTION", num_virtual_tokens=self.n_tokens,
                                  prompt_tuning_init=self.init)

    def apply(self, model: nn.Module) -> nn.Module:
        super().apply(model)
        model.encoder = PromptedEncoder(model.encoder, self.n_tokens)
        return model

    def expected_trainable(self, model: nn.Module) -> int:
        return self.n_tokens * _config(model).hidden_size + head_count(model)


@dataclass(frozen=True)
class PrefixTuning(ViaPeft):
    """n learned key and value vectors prepended in *every* layer's attention. ``projection=None``:
    the vectors are the parameters (P-tuning v2, Liu et al. 2022); ``projection=h``: they come
    from n embeddings through a d_kv → h → 2·L·d_kv MLP (Li & Liang 2021's reparametrisation)."""

    n_tokens: int = 20
    projection: int | None = None
    label: ClassVar[str] = "prefix tuning"

    @property
    def exact_reload(self) -> bool:  # type: ignore[override]
        # peft saves the MLP's output (the prefixes), not the MLP: a reload computes them no more
        return self.projection is None

    def peft_config(self, model: nn.Module) -> PrefixTuningConfig:
        extra = {"prefix_projection": True, "encoder_hidden_size": self.projection} \
            if self.projection else {}
        return PrefixTuningConfig(task_type="FEATURE_EXTRACTION", num_virtual_tokens=self.n_tokens,
                                  **extra)

    def expected_trainable(self, model: nn.Module) -> int:
        cfg, n = _config(model), self.n_tokens
        out = 2 * cfg.num_hidden_layers * _kv_width(model)  # a key and a value in every layer
        if self.projection is None:
            return n * out + head_count(model)
        h, e = self.projection, _kv_width(model)  # peft's prefix embeddings are key-sized
        return n * e + (e * h + h) + (h * out + out) + head_count(model)


@dataclass(frozen=True)
class BitFit(PeftMethod):
    """Train only the bias terms (and the head): every Linear's and LayerNorm's bias in BERT
    (the unused pooler's excepted). Llama-family models have no biases: an error."""

    label: ClassVar[str] = "BitFit"

    def apply(self, model: nn.Module) -> nn.Module:
        self.expected_trainable(model)  # raises for a model without biases
        freeze(model)
        unfreeze(model, r"^encoder\.(embeddings|encoder)\..*bias$")
        return _keep_head_trainable(model)

    def expected_trainable(self, model: nn.Module) -> int:
        cfg = _config(model)
        if family(model) not in ("bert", "roberta"):
            raise PeftMethodError(f"a {cfg.model_type} model has no bias terms, so BitFit would train "
                                  "only the head: leave BitFit out for it (or compare the head alone)")
        d, d_ff, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
        # per layer: q, k, v, attention output, LayerNorm (5d) + FF in (d_ff), out, LayerNorm (2d)
        return n_layers * (7 * d + d_ff) + d + head_count(model)  # + the embeddings' LayerNorm


@dataclass(frozen=True)
class Houlsby(PeftMethod):
    """Our Houlsby adapters (notebook 03): a d → m → d bottleneck after each sublayer, plus every
    LayerNorm and the head."""

    bottleneck: int = 16
    label: ClassVar[str] = "adapters"

    def apply(self, model: nn.Module) -> nn.Module:
        add_adapters(model, self.bottleneck)
        freeze_for_adapters(model)
        return model

    def expected_trainable(self, model: nn.Module) -> int:
        cfg, m = _config(model), self.bottleneck
        d = cfg.hidden_size
        norms = sum(1 for x in model.encoder.modules() if isinstance(x, nn.LayerNorm))
        return cfg.num_hidden_layers * 2 * (2 * d * m + d + m) + norms * 2 * d + head_count(model)


@dataclass(frozen=True)
class Full(PeftMethod):
    """Full fine-tuning: every parameter (the unused pooler's excepted). ``train_embeddings=False``
    keeps the word embeddings frozen: label it "all but embeddings" wherever it is reported."""

    train_embeddings: bool = True

    @property
    def label(self) -> str:  # type: ignore[override]
        return "full fine-tuning" if self.train_embeddings else "all but embeddings"

    def apply(self, model: nn.Module) -> nn.Module:
        unfreeze(model)
        if any(n.startswith("encoder.pooler.") for n, _ in model.named_parameters()):
            freeze(model, r"^encoder\.pooler\.")
        if not self.train_embeddings:
            freeze(model, model.encoder.get_input_embeddings())
        return model

    def expected_trainable(self, model: nn.Module) -> int:
        pooler = getattr(model.encoder, "pooler", None)
        total = sum(p.numel() for p in model.parameters())
        total -= sum(p.numel() for p in pooler.parameters()) if pooler is not None else 0
        if not self.train_embeddings:
            total -= model.encoder.get_input_embeddings().weight.numel()
        return total


METHODS: dict[str, type[PeftMethod]] = {c.__name__: c for c in
                                    (LoRA, IA3, PromptTuning, PrefixTuning, BitFit, Houlsby, Full)}


# --- what trains, and the optimizer's groups -----------------------------------------------------


def trained_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable parameters by name, layer numbers folded into ``*`` (one row per kind)."""
    rows: dict[str, int] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            key = re.sub(r"\.\d+\.", ".*.", name)
            rows[key] = rows.get(key, 0) + p.numel()
    return rows


def param_groups(model: nn.Module, weight_decay: float, head_lr_scale: float = 1.0) -> list[dict]:
    """AdamW groups for the one training recipe: the method's parameters and the head (its rate
    scaled by ``head_lr_scale``, honoured through ``lr_scale``), each split decay / no decay."""
    head = list(model.head.parameters())
    groups = decay_groups(model, weight_decay, exclude=head, name="method")
    return groups + decay_groups(model, weight_decay, params=head, name="head",
                                 lr_scale=head_lr_scale)
