"""TransferTransfo (Wolf, Sanh, Chaumond & Delangue 2019, winner of ConvAI2's automatic metrics)
on a Llama-family causal LM: a persona chatbot fine-tuned with two heads.

The recipe, from the paper:

* **one sequence** — the bot's persona, the dialogue history and a candidate reply, concatenated
  (:func:`build_input`);
* **speaker (segment) embeddings** — every token carries a learned vector saying whose text it is:
  persona, partner (the user) or bot. GPT had no such input, so TransferTransfo added one; Llama
  has none either, so :class:`DoubleHeads` adds a small ``nn.Embedding(3, d)`` to the token
  embeddings (a forward pre-hook on the first layer). It starts at **zero**, so before fine-tuning the model
  is exactly the pretrained one. Speakers are also delimited in the text, with the instruct
  model's own chat markers (:class:`ChatFormat`), which it already knows — new special tokens
  would need new, trained embedding rows;
* **LM loss on the reply only** — labels are -100 everywhere but on the gold reply's tokens;
* **next-utterance classification** — the gold reply and distractors each get a score from a
  linear head on the hidden state of their last token; cross-entropy over the candidates
  (``DoubleHeads(lm_prior=True)``: the head is added to the LM's mean log-probability of the
  candidate and starts at zero, so training starts from the LM's own ranking — a few hundred
  turns do not teach a new head alone to beat it);
* **double-heads loss** — λ_lm · LM + λ_mc · MC (:func:`double_heads_loss`; λ_lm = 2, λ_mc = 1
  as in the training command of the reference code's README, huggingface/transfer-learning-conv-ai,
  which also keeps 2 past exchanges (5 utterances) and trains with 4 candidates).

Evaluation as in ConvAI2: **Hits@1** — how often the gold reply gets the highest score among N
candidates (chance = 1/N) — and the perplexity of the gold reply. ConvAI2's files list the gold
reply **last**; :func:`turns` shuffles every turn's candidates (seeded), so the gold position
carries no information, and a scorer that prefers one position scores at chance.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .decoding import Forward, Picker, generate

PERSONA, PARTNER, BOT = 0, 1, 2
"""Segment (speaker) ids."""
IGNORE = -100


@dataclass(frozen=True)
class ChatFormat:
    """How persona and turns are delimited in the text (default: SmolLM2-Instruct's ChatML)."""

    persona: str = "<|im_start|>system\n"
    partner: str = "<|im_start|>user\n"
    bot: str = "<|im_start|>assistant\n"
    end: str = "<|im_end|>"
    sep: str = "\n"

    def prefix(self, segment: int) -> str:
        return (self.persona, self.partner, self.bot)[segment]


@dataclass(frozen=True)
class Turn:
    """One reply to predict: the bot's persona, the history (the partner's utterance last) and the
    candidate replies, ``candidates[gold]`` being the real one."""

    persona: list[str]
    history: list[str]
    candidates: list[str]
    gold: int


@dataclass(frozen=True)
class DialogueInput:
    """One candidate as model input: token ids, their speaker ids, the reply's token ids as
    labels (-100 elsewhere) and the position of the last token (read by the classification head)."""

    input_ids: list[int]
    segment_ids: list[int]
    labels: list[int]
    last: int


# --- data --------------------------------------------------------------------------------------


def turns(
    dialogues: Any, n_candidates: int | None = None, seed: int = 0, with_persona: bool = True
) -> list[Turn]:
    """Every turn of ConvAI2 rows (``personality``, ``utterances``), with the gold reply plus
    ``n_candidates - 1`` randomly drawn distractors (all 19 when None), **shuffled** so the gold
    index is uniform over positions. ``with_persona=False`` drops the persona (the ablation)."""
    rng = random.Random(seed)
    out = []
    for row in dialogues:
        persona = list(row["personality"]) if with_persona else []
        for utterance in row["utterances"]:
            *distractors, gold = utterance["candidates"]
            if n_candidates is not None:
                distractors = rng.sample(distractors, n_candidates - 1)
            candidates = [*distractors, gold]
            rng.shuffle(candidates)
            out.append(Turn(persona, list(utterance["history"]), candidates, candidates.index(gold)))
    return out


def build_input(
    tokenizer: Any, persona: Sequence[str], history: Sequence[str], reply: str | None,
    fmt: ChatFormat = ChatFormat(), max_history: int = 5, max_len: int = 256,
) -> DialogueInput:
    """Persona + the last ``max_history`` utterances + the reply as one sequence. Speakers
    alternate backwards from the partner's last utterance; the reply is the bot's. ``reply=None``
    ends with the bot's prefix: the prompt to generate a reply from. Too long: the oldest tokens
    go (the reply is kept)."""
    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    context: list[tuple[list[int], int]] = []
    if persona:
        context.append((ids(fmt.persona + " ".join(persona) + fmt.end + fmt.sep), PERSONA))
    recent = list(history)[-max_history:] if max_history else []
    for i, utterance in enumerate(recent):
        speaker = PARTNER if (len(recent) - 1 - i) % 2 == 0 else BOT  # the partner spoke last
        context.append((ids(fmt.prefix(speaker) + utterance + fmt.end + fmt.sep), speaker))
    context.append((ids(fmt.bot), BOT))
    reply_ids = ids(reply + fmt.end) if reply is not None else []
    input_ids = [t for part, _ in context for t in part] + reply_ids
    segment_ids = [s for part, s in context for _ in part] + [BOT] * len(reply_ids)
    labels = [IGNORE] * (len(input_ids) - len(reply_ids)) + reply_ids
    cut = max(0, len(input_ids) - max_len)
    return DialogueInput(input_ids[cut:], segment_ids[cut:], labels[cut:], len(input_ids) - cut - 1)


def collate(
    turns_: Sequence[Turn], tokenizer: Any, pad_id: int, fmt: ChatFormat = ChatFormat(),
    max_history: int = 5, max_len: int = 256,
) -> dict[str, torch.Tensor]:
    """A batch of turns as ``[B, N, T]`` tensors (right-padded): ``input_ids``, ``segment_ids``,
    ``attention_mask``, ``reply_labels`` (every candidate's reply) and ``labels`` (the gold
    reply's only: the LM loss), plus ``last`` ``[B, N]`` and ``gold`` ``[B]``."""
    rows = [[build_input(tokenizer, t.persona, t.history, c, fmt, max_history, max_len)
             for c in t.candidates] for t in turns_]
    B, N, T = len(rows), len(rows[0]), max(len(x.input_ids) for r in rows for x in r)
    zeros = torch.zeros(B, N, T, dtype=torch.long)
    batch = {"input_ids": torch.full((B, N, T), pad_id), "segment_ids": zeros.clone(),
             "attention_mask": zeros.clone(),
             "reply_labels": torch.full((B, N, T), IGNORE), "last": torch.zeros(B, N, dtype=torch.long),
             "gold": torch.tensor([t.gold for t in turns_])}
    for b, row in enumerate(rows):
        for n, x in enumerate(row):
            k = len(x.input_ids)
            batch["input_ids"][b, n, :k] = torch.tensor(x.input_ids)
            batch["segment_ids"][b, n, :k] = torch.tensor(x.segment_ids)
            batch["attention_mask"][b, n, :k] = 1
            batch["reply_labels"][b, n, :k] = torch.tensor(x.labels)
            batch["last"][b, n] = x.last
    is_gold = torch.arange(N)[None, :, None] == batch["gold"][:, None, None]
    batch["labels"] = batch["reply_labels"].masked_fill(~is_gold, IGNORE)
    return batch


# --- the model ---------------------------------------------------------------------------------


@contextmanager
def only_layers(decoder: nn.Module, start: int, stop: int | None = None, norm: bool = True) -> Iterator[None]:
    """Inside this block the Hugging Face ``decoder`` runs only its layers ``[start, stop)``, and
    its final norm only when ``norm`` (the states *between* layers are un-normed). The kept
    layers' attention is renumbered from 0 meanwhile, so a key/value cache made inside the block
    holds them at 0, 1, … — where the decoder reads a cache's length (its positions and mask)."""
    layers, final = decoder.layers, decoder.norm
    kept = list(layers)[start:stop]
    numbers = [layer.self_attn.layer_idx for layer in kept]
    decoder.layers = nn.ModuleList(kept)
    for i, layer in enumerate(kept):
        layer.self_attn.layer_idx = i
    if not norm:
        decoder.norm = nn.Identity()
    try:
        yield
    finally:
        decoder.layers, decoder.norm = layers, final
        for layer, number in zip(kept, numbers):
            layer.self_attn.layer_idx = number


class DoubleHeads(nn.Module):
    """A Hugging Face causal LM (``lm``: its LM head is the first head) + speaker embeddings + a
    next-utterance classification head (one score per candidate, from its last token).

    The speaker vectors join the residual stream where layer ``segment_layer`` reads it: 0 is the
    token embeddings, as in the paper. When only the top layers are trained, putting them at the
    first trained layer keeps the backward pass out of the frozen ones (about half a step's time
    for SmolLM2 with 2 trained layers) — a choice the notebook states. ``lm_prior``: a
    candidate's score is the LM's mean log-probability of its reply (:func:`lm_scores`) plus the
    head, which starts at zero (the batch then needs ``reply_labels``)."""

    def __init__(self, lm: nn.Module, n_segments: int = 3, segment_layer: int = 0,
                 lm_prior: bool = False):
        super().__init__()
        self.lm, self.segment_layer, self.lm_prior = lm, segment_layer, lm_prior
        d = lm.config.hidden_size
        self.segments = nn.Embedding(n_segments, d)
        nn.init.zeros_(self.segments.weight)  # starts as the pretrained model, exactly
        self.mc_head = nn.Linear(d, 1)
        nn.init.normal_(self.mc_head.weight, std=0.0 if lm_prior else 0.02)
        nn.init.zeros_(self.mc_head.bias)

    @contextmanager
    def speakers(self, segment_ids: torch.Tensor) -> Iterator[None]:
        """Inside this block every forward of ``lm`` adds the speaker vectors of ``segment_ids``
        to the hidden states entering layer ``segment_layer``."""
        add = self.segments(segment_ids)

        def hook(layer: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            return (args[0] + add.to(args[0].dtype), *args[1:]), kwargs

        layer = self.lm.get_decoder().layers[self.segment_layer]
        handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def hidden(self, input_ids: torch.Tensor, segment_ids: torch.Tensor,
               attention_mask: torch.Tensor) -> torch.Tensor:
        """Final hidden states ``[rows, T, d]`` of ``[rows, T]`` inputs."""
        with self.speakers(segment_ids):
            return self.lm.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def top(self, states: torch.Tensor, segment_ids: torch.Tensor,
            attention_mask: torch.Tensor) -> torch.Tensor:
        """Final hidden states ``[rows, T, d]`` from the states *entering* layer
        ``segment_layer`` (cached by :mod:`~tutorial_lib.methods.generation.dialogue_training`): only the
        layers from there up run, with the speaker vectors added first (as the hook does)."""
        decoder = self.lm.get_decoder()
        x = states + self.segments(segment_ids).to(states.dtype)
        with only_layers(decoder, self.segment_layer):
            return decoder(inputs_embeds=x, attention_mask=attention_mask).last_hidden_state

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, N, T]`` batch -> (candidate scores ``[B, N]``, hidden states ``[B·N, T, d]``);
        a batch with ``states`` (``[B, N, T, d]``) runs from layer ``segment_layer`` up."""
        B, N, T = batch["segment_ids"].shape
        rows = [batch[k].reshape(B * N, T) for k in ("segment_ids", "attention_mask")]
        if "states" in batch:
            h = self.top(batch["states"].reshape(B * N, T, -1), *rows)
        else:
            h = self.hidden(batch["input_ids"].reshape(B * N, T), *rows)
        last = h[torch.arange(B * N), batch["last"].reshape(-1)]
        scores = self.mc_head(last).view(B, N).float()
        if self.lm_prior:  # the head corrects the LM's own ranking: at zero it *is* that ranking
            scores = scores + lm_scores(self, h, batch["reply_labels"].reshape(B * N, T)).view(B, N)
        return scores, h


def token_nll(model: DoubleHeads, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood ``[rows, T-1]`` of ``labels`` (0 where -100): position
    t predicts token t+1. The LM head runs on labelled positions only (the vocabulary is large)."""
    target = labels[:, 1:]
    keep = target != IGNORE
    nll = torch.zeros(target.shape, dtype=torch.float32, device=h.device)
    logits = model.lm.get_output_embeddings()(h[:, :-1][keep]).float()
    nll[keep] = F.cross_entropy(logits, target[keep], reduction="none")
    return nll


def lm_scores(model: DoubleHeads, h: torch.Tensor, reply_labels: torch.Tensor) -> torch.Tensor:
    """``[rows]``: each row's mean log-probability of its labelled (reply) tokens under the LM
    head — the score a model without a trained classification head ranks candidates by."""
    counts = (reply_labels[:, 1:] != IGNORE).sum(-1).clamp(min=1)
    return -token_nll(model, h, reply_labels).sum(-1) / counts


def double_heads_loss(
    model: DoubleHeads, batch: dict[str, torch.Tensor], lm_coef: float = 2.0, mc_coef: float = 1.0
) -> tuple[torch.Tensor, dict[str, float]]:
    """λ_lm · (LM loss on the gold reply's tokens) + λ_mc · (cross-entropy of the gold candidate
    among the N), and both parts as floats."""
    scores, h = model(batch)
    B, N, T = batch["segment_ids"].shape
    labels = batch["labels"].reshape(B * N, T)
    lm = token_nll(model, h, labels).sum() / (labels[:, 1:] != IGNORE).sum()
    mc = F.cross_entropy(scores, batch["gold"])
    return lm_coef * lm + mc_coef * mc, {"lm": float(lm.detach()), "mc": float(mc.detach())}


# --- evaluation --------------------------------------------------------------------------------


@torch.no_grad()
def candidate_scores(model: DoubleHeads, batch: dict[str, torch.Tensor], how: str = "mc") -> torch.Tensor:
    """``[B, N]`` scores: the classification head (``"mc"``), or the LM's mean log-probability of
    each candidate reply (``"lm"``: needs no trained head, e.g. before fine-tuning)."""
    scores, h = model(batch)
    if how == "mc":
        return scores
    if how != "lm":
        raise ValueError(f"how must be 'mc' or 'lm', got {how!r}")
    B, N, T = batch["segment_ids"].shape
    return lm_scores(model, h, batch["reply_labels"].reshape(B * N, T)).view(B, N)


@torch.no_grad()
def reply_nll(model: DoubleHeads, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per turn: the NLL (nats) of the gold reply's tokens and their number; perplexity =
    exp(sum of NLL / sum of tokens)."""
    rows = torch.arange(batch["input_ids"].shape[0]), batch["gold"]
    labels = batch["labels"][rows]
    h = model.hidden(batch["input_ids"][rows], batch["segment_ids"][rows], batch["attention_mask"][rows])
    return token_nll(model, h, labels).sum(-1), (labels[:, 1:] != IGNORE).sum(-1)


def hits_at_1(scores: torch.Tensor, gold: torch.Tensor) -> list[bool]:
    """Per turn: did the gold candidate get the highest score? (mean = Hits@1; chance = 1/N)"""
    return (scores.argmax(dim=-1) == gold).tolist()


def evaluate_turns(
    score: Callable[[Sequence[Turn]], torch.Tensor], turns_: Sequence[Turn], batch_size: int = 4
) -> list[bool]:
    """Hits@1 per turn of any scorer (turns -> ``[B, N]`` scores), batch by batch."""
    correct: list[bool] = []
    for i in range(0, len(turns_), batch_size):
        chunk = turns_[i:i + batch_size]
        correct += hits_at_1(score(chunk), torch.tensor([t.gold for t in chunk]))
    return correct


# --- talking -----------------------------------------------------------------------------------


def chat_forward(model: DoubleHeads, prompt_segments: torch.Tensor) -> Forward:
    """A :data:`~tutorial_lib.methods.generation.decoding.Forward` step that adds speaker embeddings: the
    prompt's own, then the bot's for every generated token."""

    def forward(ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        segments = prompt_segments if cache is None else torch.full_like(ids, BOT)
        with model.speakers(segments):
            out = model.lm(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1].float(), out.past_key_values

    return forward


def respond(
    model: DoubleHeads, tokenizer: Any, persona: Sequence[str], history: Sequence[str], pick: Picker,
    max_new_tokens: int = 40, fmt: ChatFormat = ChatFormat(), max_history: int = 5,
) -> str:
    """The bot's reply to ``history`` (partner last) with ``persona``, decoded by ``pick``."""
    prompt = build_input(tokenizer, persona, history, None, fmt, max_history)
    ids = torch.tensor([prompt.input_ids])
    end = tokenizer(fmt.end, add_special_tokens=False)["input_ids"][-1]
    model.eval()
    new = generate(chat_forward(model, torch.tensor([prompt.segment_ids])), ids, pick, max_new_tokens, end)
    return tokenizer.decode(new[0], skip_special_tokens=True).strip()
