"""Tests for tutorial_lib.methods.prompts.probe: the logistic-regression probe on frozen features
and LP-FT's start (the probe as head fine-tuning's initial head). Tiny random causal LM."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from tiny import tiny_llama_backbone

from tutorial_lib import config
from tutorial_lib.methods.prompts import fewshot, probe
from tutorial_lib.tasks import FewShotSplit

WORDS = ["a good fun film", "a bad dull film", "good and fun", "dull and bad", "a film"]


def split(seed: int = 13, classes: int = 2) -> FewShotSplit:
    names = ["negative", "positive", "neutral"][:classes]
    train = [{"text": t, "label": i % classes} for i, t in enumerate(WORDS * 2)]
    return FewShotSplit("sst2", 2, seed, train=train, dev=train[:4], test=train[2:8],
                        label_names=names)


@pytest.mark.parametrize("classes", [2, 3])
def test_as_head_folds_the_scaler_and_gives_the_probes_probabilities(classes):
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(30, 5))
    y = np.arange(30) % classes
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)).fit(x, y)
    w, b = probe.as_head(clf, classes)
    assert w.shape == (classes, 5) and b.shape == (classes,)
    probs = torch.softmax(torch.tensor(x, dtype=torch.float32) @ w.T + b, dim=-1).numpy()
    np.testing.assert_allclose(probs, clf.predict_proba(x), atol=1e-5)
    with pytest.raises(ValueError, match="every class"):
        probe.as_head(clf, classes + 1)


def test_the_head_starts_as_the_probe_the_table_reports():
    """LP-FT: the classifier built with probe_init predicts, before any step, what the logistic
    regression of logreg_probe predicts on the same split (one fit per split, cached)."""
    lm = tiny_llama_backbone(WORDS, layers=2)
    s = split()
    init = probe.probe_init(lm, (0.1, 1.0))
    build = fewshot.cls_method(lm, config.get_scale("smoke"), pool="mean", head_init=init)(s)
    model = build().model.eval()
    assert init(s)[0] is init(s)[0]  # fitted once per split
    feats = probe.feature_cache(lm, "mean")
    _, _, clf = probe.fit_probe(s, feats, (0.1, 1.0))
    batch = fewshot.pad_collate(lm.pad_id)(lm.encode_rows(s.test))
    with torch.no_grad():
        logits = model(batch["input_ids"], batch["attention_mask"]).logits
    np.testing.assert_allclose(torch.softmax(logits, -1).numpy(),
                               clf.predict_proba(feats(s.test)), atol=1e-4)
    table = fewshot.logreg_probe(lm, config.get_scale("smoke"), [s], (0.1, 1.0))
    assert table["test_accuracy"].iloc[0] == pytest.approx(
        float((logits.argmax(-1).numpy() == probe.labels(s.test)).mean()))


def test_a_random_head_is_not_the_probe_and_unknown_starts_fail():
    lm = tiny_llama_backbone(WORDS, layers=2)
    assert probe.head_start("random", lm, (1.0,)) is None
    assert callable(probe.head_start("probe", lm, (1.0,)))
    with pytest.raises(ValueError, match="head_init"):
        probe.head_start("zeros", lm, (1.0,))
