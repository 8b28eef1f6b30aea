"""DART: differentiable prompts for few-shot learning (Zhang et al., ICLR 2022), notebook 09.

Starting from a manual prompt (``tutorial_lib.methods.prompts.prompting``), DART makes both halves trainable:

* **differentiable template** — every word piece of the template ("It", "was", ".") becomes a
  pseudo token whose embedding h_j is a free vector, initialised from the real word's embedding;
* **differentiable labels** — every class y gets a pseudo token whose embedding e_y (initialised
  from its verbalizer word) is both its *input* embedding and its *output* (decoder) row, as in a
  tied MLM head: p(y | x) = softmax_y(h_[MASK] · e_y + b_y);
* **fluency constraint** (masked LMs) — a second pass fills [MASK] with a *random* class ỹ,
  masks a fraction of the input-text tokens, and asks the MLM for each masked original token
  x_m. A binary cross-entropy (BCE: −t log p − (1 − t) log(1 − p)) pushes p(x_m | ·) to 1 when ỹ
  is the gold class and to 0 otherwise:

      L = L_C + λ · L_F,   L_F = BCE( p(x_m | x̃, ỹ), 1[ỹ = y] ).

  The upstream refactored code compared the *pseudo* label id with the real label-word id, so its
  target was always 0; here the comparison is between class indices (tested).

**On a causal LM** the input tokens come before the answer slot and cannot be conditioned on the
label there. Two fluency terms (``causal_fluency``):

* ``"label"`` (the default, 09's setting) — DART's term, moved to where a causal LM can be
  conditioned: a second pass puts the sampled class's label vector e_ỹ *before* the text and
  scores every text token, L_F = BCE( p(x_t | e_ỹ, x_<t), 1[ỹ = y] )
  (:meth:`DARTClassifier.label_fluency`). What is not the paper's: a masked LM fills masked
  tokens given both sides; here each token is predicted from the label and the text before it.
* ``"lm"`` — the stand-in 09 ran before it was rebuilt: the LM's own next-token loss on the input
  text (a mean over its tokens). It involves neither the label nor the label vectors: with it the
  method is P-tuning with label vectors (Liu et al. 2021) plus an LM-loss regulariser.

**The paper's ablations**: ``fluency_weight=0`` (no fluency term), ``train_template=False`` (the
template stays its words), ``train_labels=False`` (the label words stay fixed).

The new vectors are *not* hijacked vocabulary rows (the upstream code reused the last real ids):
the input embedding module is wrapped by :class:`ExtendedEmbedding`, which maps ids ≥ V to the
template and label parameters, so nothing in the real vocabulary changes meaning. The prompt
parameters train at the run's learning rate, the same as every other trained weight and as the
manual prompt's, at a multiple of it (``prompt_scale``: DART's code gives them their own, larger
rate) or at their own ``prompt_lr``; the backbone at the run's rate (or not at all:
``freeze_backbone=True``). :func:`start_cosines` and :func:`moved_premise` check that they moved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from ... import stats
from ...backbones import Backbone
from ...models import Output
from ...params import decay_groups
from ...tasks import FewShotSplit
from ...training import Method, ParamGroups
from .fewshot import FewShotModel, fresh
from .papers import PAPER_K16, paper_table  # noqa: F401 (09 reads them here)
from .prompt_lms import FrozenPrefix, on_frozen_states
from .prompting import (
    MASK,
    TEXT,
    PromptClassifier,
    Template,
    encode_prompts,
    freeze_below,
    prompt_collate,
    verbalizer_ids,
)

CAUSAL_FLUENCY = ("lm", "label")
"""A causal LM's fluency term: ``"label"``, DART's own term with the sampled class's vector placed
before the text (:meth:`DARTClassifier.label_fluency`; 09's), or ``"lm"``, the stand-in 09 ran
before its rebuild (next-token loss on the text, no label)."""

def bce(log_p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy from log p: −t log p − (1 − t) log(1 − p), the mean."""
    log_not_p = torch.log1p(-log_p.exp().clamp(max=1 - 1e-6))
    return -(t * log_p + (1 - t) * log_not_p).mean()


def fluency_bce(log_p: torch.Tensor, sampled: torch.Tensor, labels: torch.Tensor,
                rows: torch.Tensor) -> torch.Tensor:
    """DART's fluency loss from the scored tokens' log-probabilities: token i, read in row
    ``rows[i]``, has that row's target 1[ỹ = y] (``sampled`` == ``labels``: class indices, never
    token ids — the upstream bug); the loss is the tokens' mean :func:`bce`."""
    return bce(log_p, (sampled == labels).float()[rows])


class ExtendedEmbedding(nn.Module):
    """Token embeddings for ids < V from ``base``; ids V … V+n−1 from the prompt parameters
    (template rows first, then one row per class)."""

    def __init__(self, base: nn.Embedding, template: torch.Tensor, labels: torch.Tensor):
        super().__init__()
        self.base = base
        self.num_base = base.num_embeddings
        self.template = nn.Parameter(template)
        self.labels = nn.Parameter(labels)

    @property
    def weight(self) -> torch.Tensor:  # code that inspects the embedding matrix sees the real one
        return self.base.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        is_extra = input_ids >= self.num_base
        out = self.base(input_ids.masked_fill(is_extra, 0))
        if not bool(is_extra.any()):
            return out
        extra = torch.cat([self.template, self.labels])
        rows = extra[(input_ids - self.num_base).clamp(0, len(extra) - 1)]
        return torch.where(is_extra.unsqueeze(-1), rows.to(out.dtype), out)


class DARTClassifier(PromptClassifier):
    """DART on any :class:`~tutorial_lib.backbones.Backbone` with an LM head (a masked LM or, with
    its fluency term moved before the text, a causal LM — see the module docstring).

    ``init``: "words" (from the template's and verbalizer's words — at step 0 the model equals the
    manual prompt) or "random" (U(−max|w|, max|w|) as in DART's code). ``prefix_words``: the
    template's words *before* the input text stay words and only the template after the text
    becomes vectors (on a causal LM the text's states then never depend on a trained vector, so
    its frozen layers' work can be cached: ``prompt_lms.FrozenPrefix``). ``fluency_rows``: a
    causal LM's fluency pass reads only the first rows of each (shuffled) batch — nothing in it
    can be cached, so it costs a whole pass through every layer; a few rows give an unbiased
    estimate of the same term (None: every row). ``train_template``/``train_labels``: the
    paper's ablations (False: that part stays the words it started from).
    """

    def __init__(
        self,
        lm: Backbone,
        template: str | Template,
        label_ids: Sequence[int],
        *,
        fluency_weight: float = 1.0,
        mask_rate: float = 0.1,
        init: str = "words",
        freeze_backbone: bool = False,
        prefix_words: bool = False,
        causal_fluency: str = "label",
        train_template: bool = True,
        train_labels: bool = True,
        fluency_rows: int | None = None,
    ):
        super().__init__(lm, template, label_ids)
        if init not in ("words", "random"):
            raise ValueError(f"init must be 'words' or 'random', got {init!r}")
        if causal_fluency not in CAUSAL_FLUENCY:
            raise ValueError(f"causal_fluency must be one of {CAUSAL_FLUENCY}, got {causal_fluency!r}")
        self.causal_fluency = causal_fluency
        self.fluency_weight, self.mask_rate, self.fluency_rows = fluency_weight, mask_rate, fluency_rows
        base = lm.input_embeddings()
        if isinstance(base, ExtendedEmbedding):
            raise ValueError("this masked LM already has DART prompt embeddings; use a fresh copy")
        literal = self.template.literal_ids(lm)
        parts = [p for p in self.template.parts(raw=lm.answer_slot == "next") if p != MASK]
        fixed_parts = parts.index(TEXT) if prefix_words else 0  # literal parts before the text
        fixed = [i for pieces in literal[:fixed_parts] for i in pieces]
        words = [i for pieces in literal[fixed_parts:] for i in pieces]
        w = base.weight.detach()
        if init == "words":
            template_init, label_init = w[words].clone(), w[self.label_ids].clone()
        else:
            bound = w.abs().max().item()
            template_init = torch.empty(len(words), w.shape[1]).uniform_(-bound, bound)
            label_init = torch.empty(len(label_ids), w.shape[1]).uniform_(-bound, bound)
        self.template_words = words
        self.embedding = ExtendedEmbedding(base, template_init, label_init)
        lm.set_input_embeddings(self.embedding)
        bias = lm.decoder_bias
        self.label_bias = (None if bias is None
                           else nn.Parameter(bias.detach()[self.label_ids].clone()))
        # DART's ablations: a part that does not train stays the words it started from
        self.embedding.template.requires_grad_(train_template)
        for p in [self.embedding.labels] + ([self.label_bias] if self.label_bias is not None else []):
            p.requires_grad_(train_labels)
        V, n = self.embedding.num_base, len(words)
        self.template_ids = fixed + list(range(V, V + n))
        self.register_buffer("label_pseudo_ids", torch.arange(V + n, V + n + len(label_ids)),
                             persistent=False)
        if freeze_backbone:
            prompt = {id(p) for p in self.prompt_parameters()}
            for p in self.parameters():
                if id(p) not in prompt:
                    p.requires_grad_(False)

    def prompt_parameters(self) -> list[nn.Parameter]:
        """The template vectors, the label vectors (and label biases for heads with a bias)."""
        params = [self.embedding.template, self.embedding.labels]
        return params + ([self.label_bias] if self.label_bias is not None else [])

    def encode(self, rows, max_len: int | None = None) -> list[dict]:
        return encode_prompts(self.backbone, self.template, rows, template_ids=self.template_ids,
                              max_len=max_len)

    def label_scores(self, h: torch.Tensor) -> torch.Tensor:
        logits = h @ self.embedding.labels.T.to(h.dtype)
        return logits if self.label_bias is None else logits + self.label_bias.to(h.dtype)

    # --- the fluency constraint ----------------------------------------------------------------

    def fluency_loss(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        mask_pos: torch.Tensor,
        text_mask: torch.Tensor,
        labels: torch.Tensor,
        sampled: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """L_F for a batch: [MASK] ← a random class ỹ (``sampled``), ``mask_rate`` of the text
        tokens (at least one per row) ← [MASK]; BCE of p(original token) against 1[ỹ = y].

        Returns the loss and ``{"sampled", "targets" (per row), "positions", "p"}``.
        """
        if self.backbone.answer_slot == "next" and self.causal_fluency == "label":
            return self.label_fluency(input_ids, text_mask, labels, sampled, generator)
        if self.backbone.answer_slot == "next":
            return self._causal_fluency(input_ids, attention_mask, text_mask)
        B, dev = input_ids.size(0), input_ids.device
        sampled, targets = self._sample_classes(labels, sampled, generator)
        ids = input_ids.clone()
        rows = torch.arange(B, device=dev)
        ids[rows, mask_pos] = self.label_pseudo_ids[sampled]
        text = text_mask.bool()
        u = torch.rand(ids.shape, generator=generator).to(dev)
        chosen = text & (u < self.mask_rate)
        # every row with text masks at least one token: its lowest-u text position
        u_text = u.masked_fill(~text, 2.0)
        first = F.one_hot(u_text.argmin(1), ids.size(1)).bool() & text
        chosen |= first & ~chosen.any(1, keepdim=True)
        original = input_ids[chosen]
        ids[chosen] = self.backbone.mask_id
        h = self.backbone.features(ids, attention_mask)[chosen]
        loss, log_p = self._token_bce(h, original, targets[chosen.nonzero()[:, 0]])
        return loss, {"sampled": sampled, "targets": targets, "positions": chosen,
                      "p": log_p.exp().detach()}

    def _sample_classes(self, labels: torch.Tensor, sampled: torch.Tensor | None,
                        generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The fluency pass's class ỹ per row (drawn uniformly unless given) and its target
        1[ỹ = y] — class indices, never token ids (the upstream bug)."""
        if sampled is None:
            sampled = torch.randint(self.num_labels, (len(labels),), generator=generator)
            sampled = sampled.to(labels.device)
        return sampled, (sampled == labels).float()

    def _vocab_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The LM head's logits over the real vocabulary for states ``h``."""
        logits = h @ self.backbone.decoder_weight.T.to(h.dtype)
        bias = self.backbone.decoder_bias
        return logits if bias is None else logits + bias.to(h.dtype)

    def _token_log_p(self, h: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """log p(token | state) over the real vocabulary, one per row of ``h``."""
        return F.log_softmax(self._vocab_logits(h).float(), -1).gather(1, tokens[:, None]).squeeze(1)

    def _token_bce(self, h: torch.Tensor, tokens: torch.Tensor, t: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """BCE of p(token | state) against ``t``: −t log p − (1 − t) log(1 − p), mean; and log p."""
        log_p = self._token_log_p(h, tokens)
        return bce(log_p, t), log_p

    def label_fluency(
        self,
        input_ids: torch.Tensor,
        text_mask: torch.Tensor,
        labels: torch.Tensor,
        sampled: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """DART's fluency term on a causal LM: the sampled class ỹ's label vector e_ỹ is put
        *before* the input text, so that every text token is predicted conditioned on it,
        p(x_t | e_ỹ, x_<t); BCE of those probabilities against 1[ỹ = y]. With the gold class the
        LM learns to find the text likely after its label vector; with a wrong one, unlikely —
        the contrast that makes the label vectors carry class information. (A masked LM fills
        masks; a causal LM predicts left to right, so every text token is a target here.)

        Returns the loss and ``{"sampled", "targets" (per row), "ids" (the fluency pass's input:
        e_ỹ's pseudo id, then the text, right-padded), "positions" (which of ids[:, 1:] are text
        targets), "p" (their probabilities)}``."""
        B, dev = input_ids.size(0), input_ids.device
        sampled, targets = self._sample_classes(labels, sampled, generator)
        text = text_mask.bool()
        ids = torch.full((B, int(text.sum(1).max()) + 1), self.backbone.pad_id, device=dev)
        mask = torch.zeros_like(ids)
        ids[:, 0], mask[:, 0] = self.label_pseudo_ids[sampled], 1
        for r in range(B):
            tokens = input_ids[r][text[r]]
            ids[r, 1:1 + len(tokens)], mask[r, 1:1 + len(tokens)] = tokens, 1
        keep = mask[:, 1:].bool()  # the text tokens, each predicted from e_ỹ and the text before it
        log_p = self._token_log_p(self.backbone.features(ids, mask)[:, :-1][keep], ids[:, 1:][keep])
        loss = fluency_bce(log_p, sampled, labels, keep.nonzero()[:, 0])
        return loss, {"sampled": sampled, "targets": targets, "ids": ids, "positions": keep,
                      "p": log_p.exp().detach()}

    def _causal_fluency(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        text_mask: torch.Tensor, h: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, dict]:
        """A causal LM's stand-in for the fluency term: next-token cross-entropy on the input
        text's tokens — plain LM loss, conditioned on no label (so: not DART's term).
        ``h``: the backbone's features of this very input, when the caller has them already."""
        keep = text_mask[:, 1:].bool()
        if h is None:
            h = self.backbone.features(input_ids, attention_mask)
        logits = self._vocab_logits(h[:, :-1][keep])
        loss = F.cross_entropy(logits.float(), input_ids[:, 1:][keep])
        return loss, {"positions": keep}

    def forward(self, input_ids, attention_mask, mask_pos, text_mask=None, labels=None) -> Output:
        if (labels is None or not self.training or self.fluency_weight == 0
                or text_mask is None or not bool(text_mask.any())):
            return super().forward(input_ids, attention_mask, mask_pos, text_mask, labels)
        if self.backbone.answer_slot == "next" and self.causal_fluency == "label":
            out = super().forward(input_ids, attention_mask, mask_pos, text_mask, labels)
            n = self.fluency_rows or len(labels)  # the first rows of a shuffled batch: a random few
            fluency, _ = self.label_fluency(input_ids[:n], text_mask[:n], labels[:n])
            return Output(out.logits, out.loss + self.fluency_weight * fluency)
        if self.backbone.answer_slot == "next":
            # a causal LM reads the same input for both terms: one pass of the backbone serves
            # the answer slot and the LM loss (the masked-LM fluency pass needs its own input)
            h = self.backbone.features(input_ids, attention_mask)
            logits = self.label_scores(h[torch.arange(h.size(0), device=h.device), mask_pos])
            fluency, _ = self._causal_fluency(input_ids, attention_mask, text_mask, h)
            loss = F.cross_entropy(logits.float(), labels) + self.fluency_weight * fluency
            return Output(logits, loss)
        out = super().forward(input_ids, attention_mask, mask_pos, text_mask, labels)
        fluency, _ = self.fluency_loss(input_ids, attention_mask, mask_pos, text_mask, labels)
        return Output(out.logits, out.loss + self.fluency_weight * fluency)

    # --- optimisation and inspection ----------------------------------------------------------

    def param_groups(self, prompt_lr: float | None = None, prompt_scale: float | None = None,
                     label_scale: float | None = None) -> ParamGroups:
        """A Method's AdamW groups: the backbone at the run's rate (decay as in pretraining), the
        trainable prompt parameters without weight decay at the run's rate too (both None: equal
        rates), at ``prompt_scale`` × the run's rate (DART's code gives its vectors their own,
        larger rate; a grid over the run's rate then moves both together) or at the fixed
        ``prompt_lr`` (an ``lr_scale`` on the schedule). ``label_scale``: the label vectors (and
        biases) at their own multiple of the run's rate (None: the template's)."""
        if prompt_lr is not None and prompt_scale is not None:
            raise ValueError("give the prompt vectors a rate (prompt_lr) or a multiple of the run's "
                             "rate (prompt_scale), not both")
        labels = {id(self.embedding.labels), id(self.label_bias)}

        def groups(_: nn.Module, lr: float, weight_decay: float) -> list[dict]:
            prompt = [p for p in self.prompt_parameters() if p.requires_grad]
            out = decay_groups(self, weight_decay, exclude=self.prompt_parameters())
            scale = prompt_scale or (1.0 if prompt_lr is None else prompt_lr / lr)
            if label_scale is None:
                split = [(prompt, scale)]
            else:  # the template's vectors, then the labels' at their own multiple
                split = [([p for p in prompt if id(p) not in labels], scale),
                         ([p for p in prompt if id(p) in labels], label_scale)]
            return out + [{"params": ps, "weight_decay": 0.0, "lr_scale": x} for ps, x in split if ps]

        return groups

    @torch.no_grad()
    def nearest_words(self, label_names: Sequence[str], k: int = 5) -> pd.DataFrame:
        """The ``k`` vocabulary words nearest (cosine) to each learned template and label vector,
        next to the word it started from and the cosine between start and end."""
        vocab = self.embedding.base.weight.float()
        vocab_n = F.normalize(vocab, dim=-1)
        tok = self.backbone.tokenizer
        special = torch.tensor(sorted(set(tok.all_special_ids)), device=vocab.device)
        slots = [(f"template {i + 1}", w, v) for i, (w, v) in
                 enumerate(zip(self.template_words, self.embedding.template))]
        slots += [(f"label {n}", int(w), v) for n, w, v in
                  zip(label_names, self.label_ids, self.embedding.labels)]
        rows = []
        for slot, word, vec in slots:
            sims = vocab_n @ F.normalize(vec.float(), dim=0)
            sims[special] = -2.0
            top = torch.topk(sims, k)
            rows.append({"slot": slot, "started from": tok.convert_ids_to_tokens(word),
                         "cos(start, learned)": float(F.cosine_similarity(
                             vocab[word], vec.float(), dim=0)),
                         "nearest words": ", ".join(
                             f"{tok.convert_ids_to_tokens(int(i))} ({s:.2f})"
                             for s, i in zip(top.values.tolist(), top.indices.tolist()))})
        return pd.DataFrame(rows).set_index("slot")


MOVED_COS = 0.999
"""A prompt vector "moved" when its cosine to the word it started from fell below this (2.6°);
09's committed run once ended at cosines above 0.99999: trained at the manual prompt's rate, the
vectors never left their words."""


@torch.no_grad()
def start_cosines(model: DARTClassifier, trained_only: bool = True) -> dict[str, float]:
    """Each template and label vector's cosine to the word embedding it started from (only the
    parts that train, unless ``trained_only=False``: an ablation's fixed part stays at 1)."""
    vocab = model.embedding.base.weight.float()
    parts = [(f"template {i + 1}", w, v, model.embedding.template.requires_grad)
             for i, (w, v) in enumerate(zip(model.template_words, model.embedding.template))]
    parts += [(f"label {i}", int(w), v, model.embedding.labels.requires_grad)
              for i, (w, v) in enumerate(zip(model.label_ids, model.embedding.labels))]
    return {name: float(F.cosine_similarity(vocab[w], v.float(), dim=0))
            for name, w, v, trains in parts if trains or not trained_only}


def moved_premise(cosines: Mapping[str, float], max_cos: float = MOVED_COS) -> stats.Premise:
    """The method guard of a DART run: its prompt vectors must have left their starting words
    (mean cosine below ``max_cos``), else the run is computed "did not train" — like a prompt
    that stays at its zero-shot start. ``cosines``: :func:`start_cosines` (of one run, or the
    mean over runs)."""
    mean = sum(cosines.values()) / max(len(cosines), 1)
    return stats.Premise(mean < max_cos, stats.DID_NOT_TRAIN,
                         f"mean cosine of the prompt vectors to their start words {mean:.5f} "
                         f"(moved below {max_cos})")


def dart_method(
    lm: Backbone | Callable[[], Backbone],
    templates: Mapping[str, str],
    verbalizers: Mapping[str, Mapping[str, str]],
    *,
    prompt_lr: float | None = None,
    prompt_scale: float | None = None,
    label_scale: float | None = None,
    fluency_weight: float = 1.0,
    mask_rate: float = 0.1,
    init: str = "words",
    freeze_backbone: bool = False,
    max_len: int | None = None,
    trainable_layers: int | None = None,
    prefix_words: bool = False,
    frozen_states: bool | FrozenPrefix = False,
    causal_fluency: str = "label",
    train_template: bool = True,
    train_labels: bool = True,
    fluency_rows: int | None = None,
) -> Callable[[FewShotSplit], Callable[[], FewShotModel]]:
    """DART (see the module docstring) for ``fewshot.compare_fewshot``; each run starts from a
    fresh copy of ``lm`` whose frozen weights it shares (``trainable_layers``: a causal LM trains
    only its top layers, see ``prompting.freeze_below``); the prompt vectors' rate: see
    :meth:`DARTClassifier.param_groups` (``label_scale``: the label vectors' own multiple);
    ``prefix_words``, ``causal_fluency`` and the ablations
    ``train_template``/``train_labels`` (False: those stay their words): see
    :class:`DARTClassifier` (``fluency_weight=0``: the third ablation); ``frozen_states``: a causal
    LM runs only the template's vectors through its frozen layers, on the text's cached keys and
    values (:class:`~.prompt_lms.FrozenPrefix`, shared by all runs; the same numbers as a whole
    pass, a fraction of the time); a ``FrozenPrefix`` given here is shared with every other method
    that gets it (DART and its ablations read the same texts through the same frozen layers))."""
    frozen = frozen_states if isinstance(frozen_states, FrozenPrefix) else (
        FrozenPrefix(trainable_layers) if frozen_states and trainable_layers else None)
    if frozen is not None and frozen.trainable_layers != trainable_layers:
        raise ValueError(f"the shared frozen states are for {frozen.trainable_layers} trained "
                         f"layers, this method trains {trainable_layers}")

    def for_split(split: FewShotSplit) -> Callable[[], FewShotModel]:
        def build() -> FewShotModel:
            own = fresh(lm, trainable_layers)
            freeze_below(own, trainable_layers)
            own = on_frozen_states(own, frozen)
            ids = verbalizer_ids(own, verbalizers[split.task], split.label_names)
            model = DARTClassifier(own, templates[split.task], ids, fluency_weight=fluency_weight,
                                   mask_rate=mask_rate, init=init,
                                   freeze_backbone=freeze_backbone, prefix_words=prefix_words,
                                   causal_fluency=causal_fluency, train_template=train_template,
                                   train_labels=train_labels, fluency_rows=fluency_rows)
            return FewShotModel(model, lambda rows: model.encode(rows, max_len),
                                prompt_collate(own.pad_id),
                                Method(param_groups=model.param_groups(prompt_lr, prompt_scale,
                                                                           label_scale)),
                                own.name)

        return build

    return for_split
