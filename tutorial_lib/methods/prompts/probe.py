"""The cheap strong baseline of notebook 09: logistic regression on a frozen LM's features.

:func:`logreg_probe` fits scikit-learn's logistic regression on the frozen backbone's pooled
features (:func:`pooled_features`) of each few-shot split's training set, its C chosen on the
split's dev set, and tests it once; its rows look like :func:`.fewshot.compare_fewshot`'s
(re-exported there).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
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
    cache: dict[tuple, np.ndarray] = {}

    def feats(rows: Sequence[Mapping]) -> np.ndarray:
        key = tuple(r["text"] for r in rows)
        if key not in cache:
            cache[key] = pooled_features(b, rows, pool, max_len=max_len, frozen=frozen)
        return cache[key]

    out = []
    for split in splits:
        split.require("train", "dev", "test")
        start = time.perf_counter()
        y = {p: np.array([r["label"] for r in getattr(split, p)]) for p in ("train", "dev", "test")}
        x = {p: feats(getattr(split, p)) for p in ("train", "dev", "test")}
        fits = []
        for c in cs:
            clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000,
                                                                     random_state=seed))
            clf.fit(x["train"], y["train"])
            fits.append((float(clf.score(x["dev"], y["dev"])), c, clf))
        dev_acc, c, clf = max(fits, key=lambda f: f[0])  # first best on ties
        acc = float(clf.score(x["test"], y["test"]))
        out.append({"task": split.task, "K": split.k if split.k else "full", "split": split.seed,
                    "method": method, "test_accuracy": acc, "test_error": 1.0 - acc,
                    "dev_accuracy": dev_acc, "best_step": 0, "lr": c,
                    "seconds": time.perf_counter() - start})
    return pd.DataFrame(out)
