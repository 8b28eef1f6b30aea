"""The cheap strong baseline of notebook 09: logistic regression on a frozen LM's features.

:func:`logreg_probe` fits scikit-learn's logistic regression on the frozen backbone's pooled
features (:func:`pooled_features`) of each few-shot split's training set, its C chosen on the
split's dev set, and tests it once; its rows look like :func:`.fewshot.compare_fewshot`'s
(re-exported there). :func:`probe_init` hands the same probe to head fine-tuning as its head's
starting weights (LP-FT).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from ...backbones import Backbone, load_backbone
from ...config import Scale
from ...models import pool_hidden
from ...runtime import autocast, autocast_dtype, device
from ...tasks import FewShotSplit
from ...training import eval_loader, pad_collate
from .prompt_lms import FrozenStates, TopLayers

LOGREG = "logistic regression (frozen)"


@torch.no_grad()
def pooled_features(b: Backbone, rows: Sequence[Mapping], pool: str = "mean", batch_size: int = 64,
                    max_len: int | None = None, frozen: FrozenStates | None = None) -> np.ndarray:
    """The frozen backbone's final hidden states, one vector per example (float32): their mean
    over the real tokens (``pool="mean"``) or the pooled position head fine-tuning reads
    (``"last"``: a causal LM's last token, the end-of-text token it appends). ``frozen``: the
    lower layers' states from this cache (head fine-tuning's: the same texts, the same numbers)."""
    if pool not in ("mean", "last"):
        raise ValueError(f"pool must be 'mean' or 'last', got {pool!r}")
    model = b.classifier(2, pool=None if pool == "last" else pool).to(device()).eval()
    if frozen is not None:
        model.encoder = TopLayers(model.encoder, frozen)
    loader = eval_loader(b.encode_rows(rows, max_len), batch_size, pad_collate(b.pad_id),
                         by_length=False)  # one vector per row, in the rows' order
    out = []
    with autocast(device(), autocast_dtype(device())):
        for batch in loader:
            ids, mask = batch["input_ids"].to(device()), batch["attention_mask"].to(device())
            h = model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state.float()
            out.append(pool_hidden(h, mask, model.pool).cpu())  # pooled in float32
    return torch.cat(out).numpy()


def labels(rows: Sequence[Mapping]) -> np.ndarray:
    return np.array([r["label"] for r in rows])


def feature_cache(b: Backbone, pool: str = "mean", max_len: int | None = None,
                  frozen: FrozenStates | None = None) -> Callable[[Sequence[Mapping]], np.ndarray]:
    """``rows → pooled_features(b, rows, …)``, each list of rows computed once (splits that share
    a test set share its features)."""
    cache: dict[tuple, np.ndarray] = {}

    def feats(rows: Sequence[Mapping]) -> np.ndarray:
        key = tuple(r["text"] for r in rows)
        if key not in cache:
            cache[key] = pooled_features(b, rows, pool, max_len=max_len, frozen=frozen)
        return cache[key]

    return feats


def fit_probe(split: FewShotSplit, feats: Callable[[Sequence[Mapping]], np.ndarray],
              cs: Sequence[float], seed: int = 0) -> tuple[float, float, Pipeline]:
    """scikit-learn's logistic regression (standardised features, L2, lbfgs) on the split's train
    features, one fit per C of ``cs``; the best dev accuracy wins (the first on ties). Returns
    ``(dev accuracy, C, fitted pipeline)``; nothing is tested."""
    split.require("train", "dev")
    fits = []
    for c in cs:
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000,
                                                                 random_state=seed))
        clf.fit(feats(split.train), labels(split.train))
        fits.append((float(clf.score(feats(split.dev), labels(split.dev))), c, clf))
    return max(fits, key=lambda f: f[0])  # first best on ties


def as_head(clf: Pipeline, num_labels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fitted probe as the weight ``[C, D]`` and bias ``[C]`` of a linear head on the *raw*
    features: the scaler folded in, w/σ and b − Σ w·μ/σ. scikit-learn's binary model has one row
    z (class 1's log-odds); the head gets the rows (0, z): softmax([0, z]) = sigmoid(z), the same
    probabilities."""
    scaler, lr = clf.named_steps["standardscaler"], clf.named_steps["logisticregression"]
    if list(lr.classes_) != list(range(num_labels)):
        raise ValueError(f"the probe saw classes {list(lr.classes_)}, the head has {num_labels}: "
                         "every class needs training examples")
    w = lr.coef_ / scaler.scale_
    b = lr.intercept_ - w @ scaler.mean_
    if num_labels == 2:
        w, b = np.vstack([np.zeros_like(w), w]), np.concatenate([[0.0], b])
    return torch.tensor(w, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)


def probe_init(backbone: Backbone, cs: Sequence[float], *, pool: str = "mean",
               max_len: int | None = None, frozen: FrozenStates | None = None, seed: int = 0
               ) -> Callable[[FewShotSplit], tuple[torch.Tensor, torch.Tensor]]:
    """LP-FT's start (Kumar et al., ICLR 2022: linear probing, then fine-tuning): ``split →``
    the head weights of :func:`logreg_probe`'s probe on that split (C chosen on its dev set), one
    fit per split however many runs start from it. The frozen backbone's features: give the
    backbone before any run trains it."""
    feats, heads = feature_cache(backbone, pool, max_len, frozen), {}

    def init(split: FewShotSplit) -> tuple[torch.Tensor, torch.Tensor]:
        key = (split.task, split.k, split.seed)
        if key not in heads:
            heads[key] = as_head(fit_probe(split, feats, cs, seed)[2], split.num_labels)
        return heads[key]

    return init


def head_start(init: str, backbone: Backbone, cs: Sequence[float], **kwargs
               ) -> Callable[[FewShotSplit], tuple[torch.Tensor, torch.Tensor]] | None:
    """Head fine-tuning's start by name (``DARTSettings.head_init``): ``"probe"`` →
    :func:`probe_init` (``kwargs`` go to it), ``"random"`` → None (a new head)."""
    if init not in ("probe", "random"):
        raise ValueError(f"head_init must be 'probe' (LP-FT) or 'random', got {init!r}")
    return probe_init(backbone, cs, **kwargs) if init == "probe" else None


def logreg_probe(backbone: str | Backbone, scale: Scale, splits: Sequence[FewShotSplit],
                 cs: Sequence[float], *, pool: str = "mean", max_len: int | None = None,
                 seed: int = 0, method: str = LOGREG, frozen: FrozenStates | None = None
                 ) -> pd.DataFrame:
    """scikit-learn's logistic regression (standardised features, L2, lbfgs) on the frozen
    backbone's features (:func:`pooled_features`: by default the mean of the final hidden states)
    of each split's K-per-class train set; C from ``cs`` chosen on the
    few-shot dev set, tested once. Rows like :func:`compare_fewshot`'s (``lr`` holds the C).
    Splits that share a test set share its features (computed once). ``backbone``: a name, or a
    loaded LM (read only, never trained: no copy); ``frozen``: see :func:`pooled_features`."""
    b = backbone if isinstance(backbone, Backbone) else load_backbone(backbone, scale)
    feats = feature_cache(b, pool, max_len, frozen)
    out = []
    for split in splits:
        split.require("train", "dev", "test")
        start = time.perf_counter()
        dev_acc, c, clf = fit_probe(split, feats, cs, seed)
        acc = float(clf.score(feats(split.test), labels(split.test)))
        out.append({"task": split.task, "K": split.k if split.k else "full", "split": split.seed,
                    "method": method, "test_accuracy": acc, "test_error": 1.0 - acc,
                    "dev_accuracy": dev_acc, "best_step": 0, "lr": c,
                    "seconds": time.perf_counter() - start})
    return pd.DataFrame(out)
