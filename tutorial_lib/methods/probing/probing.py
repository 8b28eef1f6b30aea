"""Probing: what is linearly readable from each layer of a representation (notebook 10).

The recipe of Part 3 of the 2019 tutorial ("what is in a representation?"):

1. run a *frozen* model over UD English-EWT sentences and keep, for every word, the hidden
   state of its **first sub-word** at every layer (:func:`extract_features`);
2. train a linear classifier (a *probe*, scikit-learn ``LogisticRegression``) per layer to
   predict the word's UPOS tag or the label of the dependency arc to its head
   (:func:`probe_accuracy`);
3. compare with a **control task** (Hewitt & Liang 2019): every word *type* gets a random label
   drawn from the empirical label distribution (:func:`control_labels`). A probe that scores
   well on the control task memorises word types rather than reading structure, so we report
   **selectivity** = probe accuracy − control accuracy (:func:`selectivity`);
4. a model of the same architecture with **random weights** as the baseline: how much of a
   probe's accuracy is the probe, and how much is pretraining?

It also recomputes attention weights for plots (:func:`attention_maps`): our model runs
``scaled_dot_product_attention``, which never materialises them.

Models are :class:`~tutorial_lib.backbones.Backbone` objects (ours, MiniLM, any Hub model).
Layer 0 is the embedding output; layer i the output of block i (our blocks: the residual stream,
the top one after the final LayerNorm; BERT-style encoders: after each layer's LayerNorm).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits
from torch import nn

from ... import data
from ...backbones import Backbone, layer_states
from ...models import IGNORE_INDEX
from ...runtime import autocast, autocast_dtype, device, device_of
from ...training import pad_ids

# The 37 universal dependency relations of UD v2; subtypes (nmod:poss) map to their base.
DEPREL_NAMES = [
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound",
    "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat",
    "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan",
    "parataxis", "punct", "reparandum", "root", "vocative", "xcomp",
]
_DEPREL_INDEX = {name: i for i, name in enumerate(DEPREL_NAMES)}
PROPERTIES = ("upos", "deprel")


# --- sentences and labels ---------------------------------------------------------------------


@dataclass
class Sentences:
    """UD sentences with word-level labels as integer lists (UPOS and universal deprel)."""

    tokens: list[list[str]]
    upos: list[list[int]]
    deprel: list[list[int]]
    sent_ids: list[str]

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def n_words(self) -> int:
        return sum(map(len, self.tokens))


def upos_names() -> list[str]:
    """The 17 UPOS tags, in the order of the ``upos`` ClassLabel of ``data.load("ud-ewt")``."""
    return list(data.load("ud-ewt")["train"].features["upos"].feature.names)


def label_names(prop: str) -> list[str]:
    """Class names of a probed property (``"upos"`` or ``"deprel"``)."""
    if prop not in PROPERTIES:
        raise ValueError(f"unknown property {prop!r}: choose one of {PROPERTIES}")
    return upos_names() if prop == "upos" else list(DEPREL_NAMES)


def deprel_index(label: str) -> int:
    """Universal relation index of a (possibly subtyped) UD deprel, e.g. ``nmod:poss`` → nmod."""
    return _DEPREL_INDEX[label.split(":")[0]]


def load_sentences(split: str, n: int | None, seed: int = 0, offset: int = 0) -> Sentences:
    """``n`` UD-EWT sentences of ``split`` (shuffled with ``seed``; ``offset`` skips the first ones,
    so that two calls with the same seed and disjoint ranges give disjoint sets)."""
    ds = data.load("ud-ewt")[split].shuffle(seed=seed)
    stop = len(ds) if n is None else min(len(ds), offset + n)
    ds = ds.select(range(offset, stop))
    return Sentences(
        tokens=data.column(ds, "tokens"),
        upos=[list(r) for r in data.column(ds, "upos")],
        deprel=[[deprel_index(d) for d in row] for row in data.column(ds, "deprel")],
        sent_ids=data.column(ds, "sent_id"),
    )


# --- sub-word alignment -----------------------------------------------------------------------


def first_subword_positions(word_ids: Sequence[int | None]) -> dict[int, int]:
    """Map each word index to the position of its first sub-word.

    ``word_ids`` is a fast tokenizer's ``encoding.word_ids()``: the word index of every token,
    ``None`` for special tokens. A word cut off by truncation (or one the normaliser erased)
    has no entry.

    >>> first_subword_positions([None, 0, 0, 1, 2, 2, None])
    {0: 1, 1: 3, 2: 4}
    """
    first: dict[int, int] = {}
    for pos, w in enumerate(word_ids):
        if w is not None and w not in first:
            first[w] = pos
    return first


@dataclass
class EncodedSentence:
    input_ids: list[int]
    positions: list[int]  # first sub-word position of every kept word
    words: list[int]  # the kept words' indices in the sentence
    word_ids: list[int | None]  # the word of every token (None: special token)


def encode_words(
    tokenizer, tokens: Sequence[Sequence[str]], *, add_special_tokens: bool, max_len: int
) -> list[EncodedSentence]:
    """Tokenize pre-split sentences (truncated to ``max_len``) and align words to sub-words."""
    enc = tokenizer([list(t) for t in tokens], is_split_into_words=True,
                    add_special_tokens=add_special_tokens, truncation=True, max_length=max_len)
    out = []
    for i in range(len(tokens)):
        first = first_subword_positions(enc.word_ids(i))
        words = sorted(first)
        out.append(EncodedSentence(enc["input_ids"][i], [first[w] for w in words], words,
                                   enc.word_ids(i)))
    return out


# --- models and feature extraction ----------------------------------------------------------


def encode_joined(tokenizer, tokens: Sequence[Sequence[str]], *, max_len: int) -> list[EncodedSentence]:
    """For a byte-level BPE (GPT-style) tokenizer: each sentence as running text, words joined by
    spaces, aligned by character offsets (such tokenizers only split pre-split words correctly
    when built with ``add_prefix_space``; running text is also what a causal LM was trained on)."""
    texts = [" ".join(t) for t in tokens]
    enc = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=max_len,
                    return_offsets_mapping=True)
    out = []
    for words, ids, offsets in zip(tokens, enc["input_ids"], enc["offset_mapping"]):
        starts, pos = [], 0
        for w in words:  # character span of every word in the joined text
            starts.append((pos, pos + len(w)))
            pos += len(w) + 1
        word_ids: list[int | None] = []
        w = 0
        for a, b in offsets:
            while w < len(starts) and starts[w][1] <= a:
                w += 1
            word_ids.append(w if w < len(starts) and b > starts[w][0] else None)
        first = first_subword_positions(word_ids)
        kept = sorted(first)
        out.append(EncodedSentence(list(ids), [first[k] for k in kept], kept, word_ids))
    return out


def encode_sentences(backbone: Backbone, sentences: Sentences) -> list[EncodedSentence]:
    """Pre-split sentences encoded for ``backbone`` with its special tokens (ours: none), words
    aligned to their first sub-words (a causal Hugging Face LM: as running text)."""
    if backbone.kind == "causal" and not backbone.is_ours:
        return encode_joined(backbone.tokenizer, sentences.tokens, max_len=backbone.max_len)
    return encode_words(backbone.tokenizer, sentences.tokens,
                        add_special_tokens=not backbone.is_ours, max_len=backbone.max_len)


@dataclass
class WordFeatures:
    """Per-layer word vectors of a set of sentences, with where each row comes from."""

    layers: list[np.ndarray]  # one [n_words, d] float32 array per layer
    sentence: np.ndarray  # [n_words] sentence index
    word: np.ndarray  # [n_words] word index inside the sentence

    def labels(self, sentences: Sentences, prop: str) -> np.ndarray:
        """The ``prop`` label (``"upos"``/``"deprel"``) of every row."""
        rows = getattr(sentences, prop)
        return np.array([rows[s][w] for s, w in zip(self.sentence, self.word)], dtype=np.int64)

    def words(self, sentences: Sentences) -> list[str]:
        """The word form of every row."""
        return [sentences.tokens[s][w] for s, w in zip(self.sentence, self.word)]


def states_by_length(backbone: Backbone, rows: Sequence[Sequence[int]], batch_size: int = 64,
                     final: bool = True) -> Iterator[tuple[list[int], tuple[torch.Tensor, ...]]]:
    """The frozen encoder over token-id ``rows``, shortest first (each padded batch nearly as long
    as its rows), in eval mode under autocast, without gradients: yields (the batch's row indices,
    its :func:`tutorial_lib.backbones.layer_states`, only the top one when ``final``)."""
    dev, amp = device(), autocast_dtype()
    encoder = backbone.encoder.to(dev).eval()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, mask = pad_ids([rows[i] for i in idx], backbone.pad_id)
        with torch.no_grad(), autocast(dev, amp):
            states = layer_states(encoder, ids.to(dev), mask.to(dev), final)
        yield idx, states


@torch.no_grad()
def extract_features(
    backbone: Backbone, sentences: Sentences, batch_size: int = 64, final: bool = False
) -> WordFeatures:
    """First-sub-word vectors of every word at every layer (frozen model, eval mode, bf16
    autocast where fast). Sentences are batched by length to save padding. ``final=True``:
    one layer, the encoder's output (see :func:`tutorial_lib.backbones.layer_states`)."""
    encoded = encode_sentences(backbone, sentences)
    per_sentence: dict[int, list[np.ndarray]] = {}
    for idx, states in states_by_length(backbone, [e.input_ids for e in encoded], batch_size, final):
        stacked = torch.stack(states, dim=0).float().cpu()  # [L, B, T, D]
        for row, i in enumerate(idx):
            per_sentence[i] = stacked[:, row, encoded[i].positions].numpy()  # [L, n_words, D]
    n_layers = len(states)
    layers = [np.concatenate([per_sentence[i][layer] for i in range(len(encoded))])
              for layer in range(n_layers)]
    sentence = np.concatenate([np.full(len(e.words), i) for i, e in enumerate(encoded)])
    word = np.concatenate([np.asarray(e.words, dtype=np.int64) for e in encoded])
    return WordFeatures([x.astype(np.float32) for x in layers], sentence, word)


# --- probes and control tasks -----------------------------------------------------------------


def make_probe(max_iter: int = 100, C: float = 1.0) -> Pipeline:
    """A linear probe: standardise the features, then multinomial logistic regression (lbfgs)."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, C=C))


def probe_correct(
    X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
    max_iter: int = 100, C: float = 1.0,
) -> np.ndarray:
    """Which test items a linear probe trained on ``(X_train, y_train)`` gets right (bool array:
    two probes on the same items are compared item by item, ``stats.compare_items``).

    Runs single-threaded: on a small shared CPU, BLAS threads fighting over cores made lbfgs
    10-20x slower than one thread.
    """
    with single_threaded(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget is the protocol
        probe = make_probe(max_iter, C).fit(X_train, y_train)
        return probe.predict(X_test) == np.asarray(y_test)


def probe_accuracy(
    X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
    max_iter: int = 100, C: float = 1.0,
) -> float:
    """Test accuracy of a linear probe trained on ``(X_train, y_train)``."""
    return float(probe_correct(X_train, y_train, X_test, y_test, max_iter, C).mean())


def single_threaded():
    """Context manager: BLAS/OpenMP libraries (numpy, scipy, scikit-learn) use one thread."""
    return threadpool_limits(limits=1)


def majority_rate(y_train: np.ndarray, y_test: np.ndarray) -> float:
    """Accuracy on ``y_test`` of always predicting the most frequent training label."""
    values, counts = np.unique(y_train, return_counts=True)
    return float(np.mean(y_test == values[counts.argmax()]))


def label_distribution(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Empirical distribution of integer labels (length ``num_classes``, sums to 1)."""
    counts = np.bincount(np.asarray(labels), minlength=num_classes).astype(float)
    return counts / counts.sum()


def control_label(word: str, distribution: np.ndarray, seed: int = 0) -> int:
    """The control-task label of one word type: a draw from ``distribution`` seeded by the word.

    A deterministic function of (word, seed): every occurrence of a type gets the same label,
    whichever set or order it appears in (Hewitt & Liang 2019, Sec. 2).
    """
    rng = np.random.default_rng([seed, zlib.crc32(word.encode("utf-8"))])
    return int(rng.choice(len(distribution), p=distribution))


def control_labels(words: Sequence[str], distribution: np.ndarray, seed: int = 0) -> np.ndarray:
    """Control-task labels for a list of word tokens (see :func:`control_label`)."""
    cache: dict[str, int] = {}
    for w in words:
        if w not in cache:
            cache[w] = control_label(w, distribution, seed)
    return np.array([cache[w] for w in words], dtype=np.int64)


def selectivity(probe_acc: float | np.ndarray, control_acc: float | np.ndarray):
    """Hewitt & Liang's selectivity: probe accuracy minus control-task accuracy."""
    return probe_acc - control_acc


def correct_by_word(train: WordFeatures, test: WordFeatures, train_sentences: Sentences,
                    test_sentences: Sentences, prop: str, layer: int, max_iter: int = 100
                    ) -> pd.Series:
    """Whether a probe of ``layer`` gets each test word's ``prop`` right, indexed by (sentence,
    word): two models' series can be aligned on the words both kept (a tokenizer may truncate
    or drop different words) and compared item by item (``stats.compare_items``)."""
    ok = probe_correct(train.layers[layer], train.labels(train_sentences, prop), test.layers[layer],
                       test.labels(test_sentences, prop), max_iter)
    return pd.Series(ok, index=pd.MultiIndex.from_arrays([test.sentence, test.word]))


def majority_correct_by_word(train: WordFeatures, test: WordFeatures, train_sentences: Sentences,
                             test_sentences: Sentences, prop: str) -> pd.Series:
    """Whether the majority tag of the training words is each test word's ``prop``, indexed as
    :func:`correct_by_word`: the floor of a probe comparison (``stats.compare_items``)."""
    guess = np.bincount(train.labels(train_sentences, prop)).argmax()
    ok = test.labels(test_sentences, prop) == guess
    return pd.Series(ok, index=pd.MultiIndex.from_arrays([test.sentence, test.word]))


def spread_layers(n_states: int, k: int | None) -> list[int]:
    """At most ``k`` layer indices of ``n_states``, evenly spread, always with the first (the
    embeddings) and the last (None: all): a 31-state model costs what an 8-state one does."""
    if k is None or k >= n_states:
        return list(range(n_states))
    return sorted({round(i * (n_states - 1) / (k - 1)) for i in range(k)})


def probe_layers(
    name: str,
    train: WordFeatures,
    test: WordFeatures,
    train_sentences: Sentences,
    test_sentences: Sentences,
    *,
    props: Sequence[str] = PROPERTIES,
    controls: bool = True,
    layers: Sequence[int] | None = None,
    max_iter: int = 100,
    control_seed: int = 0,
) -> pd.DataFrame:
    """Probe (and control-task) accuracy for every layer and property: one row each."""
    rows = []
    train_words, test_words = train.words(train_sentences), test.words(test_sentences)
    for prop in props:
        y_tr, y_te = train.labels(train_sentences, prop), test.labels(test_sentences, prop)
        dist = label_distribution(y_tr, int(y_tr.max()) + 1)
        c_tr = control_labels(train_words, dist, control_seed)
        c_te = control_labels(test_words, dist, control_seed)
        for layer in layers if layers is not None else range(len(train.layers)):
            X_tr, X_te = train.layers[layer], test.layers[layer]
            acc = probe_accuracy(X_tr, y_tr, X_te, y_te, max_iter)
            row = {"model": name, "property": prop, "layer": layer, "accuracy": acc,
                   "majority": majority_rate(y_tr, y_te)}
            if controls:
                row["control_accuracy"] = probe_accuracy(X_tr, c_tr, X_te, c_te, max_iter)
                row["selectivity"] = selectivity(acc, row["control_accuracy"])
            rows.append(row)
    return pd.DataFrame(rows)


def pca_2d(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """The first two principal components of standardised ``X`` ([n, 2])."""
    return PCA(n_components=2, random_state=seed).fit_transform(StandardScaler().fit_transform(X))


# --- attention maps ---------------------------------------------------------------------------


def _weights(attn: nn.Module, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(QK^T/sqrt(d_head)) of one ``SelfAttention`` on its (LayerNorm'd) input x."""
    B, T, D = x.shape
    q, k, _ = attn.qkv(x).float().split(D, dim=2)
    q, k = (t.view(B, T, attn.n_head, D // attn.n_head).transpose(1, 2) for t in (q, k))
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // attn.n_head)  # [B, H, T, T]
    if attn.causal:
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    elif key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    return F.softmax(scores, dim=-1)


@torch.no_grad()
def attention_maps(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """Attention weights of every block of our model, each [B, heads, T, T] (rows: queries).

    Forward hooks catch the input of each block's ``attn`` (already LayerNorm'd by the block)
    and recompute the weights from its ``qkv`` projection with the same causal / padding mask.
    """
    transformer = model.base_model  # our Transformer, inside an LM or on its own
    maps: list[torch.Tensor] = []

    def hook(module: nn.Module, args: tuple, _output: torch.Tensor) -> None:
        x, key_mask = args[0], args[1] if len(args) > 1 else None
        maps.append(_weights(module, x, key_mask).cpu())

    handles = [b.attn.register_forward_hook(hook) for b in transformer.blocks]
    try:
        transformer.eval()
        dev = device_of(transformer)
        transformer(input_ids.to(dev), None if attention_mask is None else attention_mask.to(dev))
    finally:
        for h in handles:
            h.remove()
    return maps


# --- token-level batches (for the adversarial POS head of notebook 11) ------------------------


def token_label_rows(backbone: Backbone, sentences: Sentences, prop: str = "upos") -> list[dict]:
    """``{"input_ids", "labels"}`` rows: the label at each word's first sub-word, IGNORE_INDEX
    elsewhere (the usual token-classification layout)."""
    encoded = encode_sentences(backbone, sentences)
    rows = []
    values = getattr(sentences, prop)
    for e, labels in zip(encoded, values):
        y = [IGNORE_INDEX] * len(e.input_ids)
        for pos, w in zip(e.positions, e.words):
            y[pos] = labels[w]
        rows.append({"input_ids": e.input_ids, "labels": y})
    return rows
