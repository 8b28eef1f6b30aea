"""The tutorial's Transformer, in one file of plain PyTorch.

Recognisable from the NAACL-2019 slides (token + learned position embeddings, N blocks of
self-attention and feed-forward, an LM head tied to the embeddings, a classification head on a
[CLS] token *appended at the end* of each input) but written the way it should be:

* pre-LayerNorm residual blocks, ``x = x + Dropout(Sublayer(LN(x)))``, and a final LayerNorm
  (GPT-2, Radford et al. 2019, Sec. 2.3). The 2019 code re-normalised the residual stream itself
  and had no final LN;
* attention through ``torch.nn.functional.scaled_dot_product_attention`` (Vaswani et al. 2017,
  Eq. 1: softmax(QK^T / sqrt(d_k)) V), batch-first tensors, boolean masks;
* init N(0, 0.02) everywhere. With PyTorch's default N(0, 1) embedding init and a tied head the
  first logits are huge and CPU training crawls through denormal floats;
* every block has two empty adapter slots (``nn.Identity``) after its attention and its
  feed-forward sublayer, where ``tutorial_lib.methods.peft.adapters`` inserts Houlsby adapters.

The names are nanoGPT's (``d_model``, ``n_layer``, ``tok_emb``), and the Hugging Face contract that
generic code reads is spoken too: ``config.hidden_size`` / ``num_hidden_layers`` /
``num_attention_heads`` / ``is_decoder``, ``get_input_embeddings()``, ``base_model``, and a
classifier keeps its encoder at ``.encoder`` (:class:`SequenceClassifier`, the one classifier for
ours and Hugging Face encoders). Code above this file never has to ask which family a model is.

Padding convention: inputs are **right-padded** and ``attention_mask`` is 1 for real tokens.
Under the causal mask no real token can see a later pad, so the causal model needs no padding
mask at all; the bidirectional model masks pad keys explicitly.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import integrity
from .runtime import atomic_write

IGNORE_INDEX = -100  # label value that the losses skip (F.cross_entropy's default)


class ModelError(RuntimeError):
    """A checkpoint that is missing or does not fit the model asked for."""


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int
    d_model: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_ff: int = 1024
    max_len: int = 128
    dropout: float = 0.1
    causal: bool = True  # True: GPT-style LM; False: BERT-style masked LM
    pad_id: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")

    # the Hugging Face names of the same numbers (read-only: the nanoGPT names are the fields)
    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def num_hidden_layers(self) -> int:
        return self.n_layer

    @property
    def num_attention_heads(self) -> int:
        return self.n_head

    @property
    def is_decoder(self) -> bool:
        return self.causal


class Output(NamedTuple):
    logits: torch.Tensor
    loss: torch.Tensor | None = None


class EncoderOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # [B, T, D], after the final LayerNorm
    hidden_states: tuple[torch.Tensor, ...] | None = None  # embeddings + each block's output


class SelfAttention(nn.Module):
    """Multi-head self-attention. ``qkv`` packs W_Q, W_K, W_V as rows [Q; K; V], each head-major."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_head, self.causal, self.dropout = cfg.n_head, cfg.causal, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        # [B, T, D] -> [B, heads, T, d_head]
        q, k, v = (t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        attn_mask = None
        if key_mask is not None and not self.causal:
            attn_mask = key_mask[:, None, None, :]  # [B, 1, 1, T]: True where a key may be seen
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=self.causal,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class FeedForward(nn.Module):
    """Position-wise feed-forward network: W_2 GELU(W_1 x) (Vaswani et al. 2017, Eq. 2)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN Transformer block with adapter slots (identity until adapters are added)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg)
        self.adapter_attn: nn.Module = nn.Identity()
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff = FeedForward(cfg)
        self.adapter_ff: nn.Module = nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop(self.adapter_attn(self.attn(self.ln1(x), key_mask)))
        x = x + self.drop(self.adapter_ff(self.ff(self.ln2(x))))
        return x


class Transformer(nn.Module):
    """The encoder/decoder stack shared by every head: ids [B, T] -> hidden states [B, T, D]."""

    pool = "last"  # where a classifier reads the sequence: our [CLS] is appended at the *end*
    layer_names = ("block", " (+ ln_f)")  # what a layer is called; the top state is after ln_f

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(_init_weights)
        # GPT-2 scales the init of the projections that write into the residual stream by
        # 1/sqrt(2 * n_layer), so the stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def get_input_embeddings(self) -> nn.Embedding:
        return self.tok_emb

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.tok_emb = module

    @property
    def base_model(self) -> Transformer:
        return self

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """``hidden_states`` (with ``output_hidden_states``): the embeddings and every block's
        output, the top one after the final LayerNorm (what a head reads), as Hugging Face's
        pre-LN decoders report them."""
        B, T = input_ids.shape
        if T > self.config.max_len:
            raise ValueError(
                f"sequence length {T} exceeds max_len={self.config.max_len}: truncate the input "
                "(tokenization.encode_with_cls keeps the first max_len - 1 tokens and the [CLS]) "
                "or use a scale whose model.max_len is larger")
        pos = torch.arange(T, device=input_ids.device)
        x = self.drop(self.tok_emb(input_ids) + self.pos_emb(pos))
        key_mask = attention_mask.bool() if attention_mask is not None else None
        hidden = [x] if output_hidden_states else None
        for block in self.blocks:
            x = block(x, key_mask)
            if hidden is not None:
                hidden.append(x)
        x = self.ln_f(x)
        if hidden is not None:
            hidden[-1] = x
        return EncoderOutput(x, tuple(hidden) if hidden is not None else None)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class TransformerLM(nn.Module):
    """Transformer + LM head tied to the token embeddings (Press & Wolf 2017).

    Causal (``config.causal``): predicts token t+1 from tokens <= t; ``labels`` are the inputs
    themselves and the shift happens here. Masked LM: ``labels`` hold the original ids at masked
    positions and IGNORE_INDEX elsewhere (see ``tutorial_lib.training.mask_tokens``); the head is
    then only applied at masked positions, which is most of the MLM's saving.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.config = cfg
        self.transformer = Transformer(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        self.lm_head.weight = self.transformer.tok_emb.weight

    @property
    def base_model(self) -> Transformer:
        """The network without its head (Hugging Face's name for it)."""
        return self.transformer

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.tok_emb

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.transformer.tok_emb = module

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> Output:
        h = self.transformer(input_ids, attention_mask).last_hidden_state
        if labels is None:
            return Output(self.lm_head(h))
        if self.config.causal:
            logits = self.lm_head(h[:, :-1])
            targets = labels[:, 1:]
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
            return Output(logits, loss)
        selected = labels != IGNORE_INDEX
        logits = self.lm_head(h[selected])  # [n_masked, V]
        return Output(logits, F.cross_entropy(logits.float(), labels[selected]))


def last_token(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``hidden[b, t_b]`` with t_b the last real (right-padded) position of row b: [B, T, D] → [B, D].
    Our [CLS] sits there."""
    last = attention_mask.long().sum(1) - 1
    return hidden[torch.arange(hidden.size(0), device=hidden.device), last]


POOLS = ("first", "last", "mean")


def pool_hidden(hidden: torch.Tensor, attention_mask: torch.Tensor, pool: str) -> torch.Tensor:
    """The sequence vector: position 0 (``"first"``: BERT's [CLS]), the last real token
    (``"last"``: our [CLS], a causal LM's summary token) or the mean over the real tokens
    (``"mean"``: sentence-transformers' pooling; on a causal LM every token then counts)."""
    if pool == "first":
        return hidden[:, 0]
    if pool == "last":
        return last_token(hidden, attention_mask)
    if pool == "mean":
        m = attention_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)
    raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over classes, or mean squared error for one output (regression, e.g. STS-B),
    as Hugging Face's ``*ForSequenceClassification`` does with ``num_labels == 1``."""
    if logits.size(-1) == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)


class EncoderHead(nn.Module):
    """The head family: an encoder + dropout + one linear layer (``head``, N(0, 0.02), zero bias)
    on its hidden states ``[B, T, D]``. :class:`SequenceClassifier` reads one pooled position,
    ``token_tasks.TokenClassifier`` every position, ``extractive_qa.SpanExtractor`` every position
    twice (start, end); each says its own loss."""

    def __init__(self, encoder: nn.Module, outputs: int, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, outputs)
        _init_weights(self.head)

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's last hidden states: [B, T, D]."""
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class SequenceClassifier(EncoderHead):
    """Any encoder + dropout + a linear head on the pooled position; ``num_labels == 1``:
    regression (mean squared error).

    ``encoder`` is ours (:class:`Transformer`) or a Hugging Face base model: ids → hidden states
    ``[B, T, D]`` (``config.hidden_size`` = D). ``pool`` says where the sequence representation
    is: ``"last"`` for ours (the [CLS] appended at the end) and for causal LMs, ``"first"`` for
    BERT-style encoders (see :func:`pool_hidden`).
    """

    def __init__(self, encoder: nn.Module, num_labels: int, pool: str = "first",
                 dropout: float = 0.1):
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
        super().__init__(encoder, num_labels, dropout)
        self.num_labels, self.pool = num_labels, pool

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The hidden state at the pooled position of each row: [B, D]."""
        return pool_hidden(self.hidden(input_ids, attention_mask), attention_mask, self.pool)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> Output:
        logits = self.head(self.dropout(self.pooled(input_ids, attention_mask)))
        return Output(logits, None if labels is None else sequence_loss(logits, labels))


class TransformerClassifier(SequenceClassifier):
    """Our Transformer + a linear head on the hidden state of the [CLS] token appended at the end.

    The slides' fine-tuning model: with a causal mask only the *last* token has seen the whole
    input, so the classification token goes at the end. With right padding it sits at position
    ``attention_mask.sum(1) - 1`` (``pool="last"``). ``lm_head`` (tied) is kept so that an
    auxiliary LM loss can be added during fine-tuning (notebook 06).
    """

    def __init__(self, cfg: TransformerConfig, num_labels: int, dropout: float | None = None):
        encoder = Transformer(cfg)
        lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        super().__init__(encoder, num_labels, pool="last",
                         dropout=cfg.dropout if dropout is None else dropout)
        self.config = cfg
        self.lm_head = lm_head
        self.tie_weights()

    def tie_weights(self) -> None:
        self.lm_head.weight = self.encoder.tok_emb.weight

    @classmethod
    def from_lm(cls, lm: TransformerLM, num_labels: int) -> TransformerClassifier:
        """A classifier whose Transformer starts from a pretrained LM's weights (head is new)."""
        clf = cls(dataclasses.replace(lm.config), num_labels)
        clf.encoder.load_state_dict(lm.transformer.state_dict())
        return clf


# --- checkpoints ---------------------------------------------------------------------------

CHECKPOINT_FILE = "model.pt"


def save_pretrained(model: TransformerLM, directory: str | Path, **extra: object) -> Path:
    """Write ``model.pt`` (config + weights + ``extra`` metadata) atomically into ``directory``,
    with an integrity record (size and sha256) beside it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    payload = {
        "config": dataclasses.asdict(model.config),
        "state_dict": model.state_dict(),
        "extra": extra,
    }
    # atomic: a crash (or a full disk) leaves either the old or the new file, never half
    integrity.save_torch(payload, path)
    atomic_write(directory / "config.json", json.dumps(payload["config"], indent=2))
    return path


def load_pretrained(directory: str | Path, causal: bool | None = None) -> TransformerLM:
    """Load a ``TransformerLM`` saved by :func:`save_pretrained`.

    ``causal`` (optional) checks the objective, so that an MLM is never silently used as a
    causal LM or the other way round. A file that does not match its integrity record, or whose
    weights do not fit its configuration, raises :class:`ModelError` (and is left in place).
    """
    path = Path(directory) / CHECKPOINT_FILE
    if not path.exists():
        raise ModelError(
            f"no checkpoint at {path}: run notebook 01_pretraining (or "
            "tutorial_lib.pretraining.ensure) to create it."
        )
    damage = integrity.problem(path, require_record=False)  # files saved by hand may have none
    if damage:
        raise ModelError(f"checkpoint {path} is damaged ({damage}). Delete it and pretrain again "
                         "(pretraining.ensure rebuilds a damaged cached model itself).")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    cfg = TransformerConfig(**payload["config"])
    if causal is not None and cfg.causal != causal:
        want, got = ("causal", "masked") if causal else ("masked", "causal")
        raise ModelError(f"{path} holds a {got} LM, but a {want} LM was asked for.")
    model = TransformerLM(cfg)
    try:
        missing, unexpected = model.load_state_dict(payload["state_dict"], strict=False)
    except RuntimeError as err:  # a tensor of another shape than the configuration says
        shapes = [ln.strip() for ln in str(err).splitlines() if "size mismatch" in ln][:3]
        raise ModelError(
            f"checkpoint {path} does not fit its own configuration TransformerLM({cfg}): "
            f"{'; '.join(shapes) or err}. Delete it and pretrain again."
        ) from err
    missing = [k for k in missing if k != "lm_head.weight"]  # tied: stored once
    if missing or unexpected:
        raise ModelError(
            f"checkpoint {path} does not match TransformerLM({cfg}): missing {missing}, "
            f"unexpected {unexpected}. Delete it and pretrain again."
        )
    model.tie_weights()
    return model


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters, counting tied tensors once."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total
