"""Tests for tutorial_lib.methods.tdt.regularized: R-Drop, R3F, token cutoff, their shared pieces and
the evaluation on transfer sets (other tasks' test splits)."""

import pytest
import torch
import torch.nn.functional as F
from tiny import near
from tiny import padded_batch as _batch
from tiny import tiny_bert_classifier as _hf

from tutorial_lib.methods.tdt import regularized
from tutorial_lib.models import TransformerClassifier, TransformerConfig


def _ours(dropout: float = 0.0, num_labels: int = 3) -> TransformerClassifier:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2, d_ff=32, max_len=12,
                            dropout=dropout, causal=False)
    return TransformerClassifier(cfg, num_labels=num_labels, dropout=dropout)


def _log_p(seed: int) -> torch.Tensor:
    return F.log_softmax(torch.randn(5, 3, generator=torch.Generator().manual_seed(seed)), -1)


def test_rdrop_kl_is_symmetric_and_zero_for_identical_passes():
    a, b = _log_p(0), _log_p(1)
    assert regularized.symmetric_kl(a, b).item() == pytest.approx(
        regularized.symmetric_kl(b, a).item(), rel=1e-6)
    # a one-sided KL is not symmetric: the test above would catch it
    assert regularized.kl_per_example(a, b).mean() != pytest.approx(
        regularized.kl_per_example(b, a).mean().item(), rel=1e-3)
    assert regularized.symmetric_kl(a, a).item() == pytest.approx(0.0, abs=1e-7)
    assert regularized.symmetric_kl(a, b).item() > 0


def test_kl_is_summed_over_classes_not_averaged():
    """Upstream TDT's KLDivLoss() averaged over classes too (kl_rate silently divided by C)."""
    p = torch.tensor([[0.7, 0.2, 0.1]])
    q = torch.tensor([[0.2, 0.3, 0.5]])
    expected = (p * (p / q).log()).sum()
    assert regularized.kl_per_example(p.log(), q.log()).item() == pytest.approx(expected.item())


def test_js_divergence_bounds():
    a, b = _log_p(0), _log_p(1)
    assert regularized.js_divergence(a, a).item() == pytest.approx(0.0, abs=1e-7)
    assert 0 < regularized.js_divergence(a, b).item() <= torch.log(torch.tensor(2.0)).item()


def test_rdrop_without_dropout_is_plain_cross_entropy():
    model, batch = _ours(dropout=0.0), _batch()
    plain = model(**batch).loss
    assert regularized.rdrop_loss(model, batch, alpha=5.0).item() == pytest.approx(plain.item(),
                                                                                   rel=1e-5)
    model = _ours(dropout=0.3)
    model.train()
    assert regularized.rdrop_loss(model, batch, alpha=1.0).item() != pytest.approx(
        model(**batch).loss.item(), rel=1e-4)


@pytest.mark.parametrize("make", [_ours, _hf], ids=["ours", "hf"])
def test_content_mask_excludes_cls_and_padding(make):
    model, batch = make(), _batch()
    content = regularized.content_mask(model, batch["attention_mask"])
    lengths = batch["attention_mask"].sum(1)
    for row, n in enumerate(lengths.tolist()):
        assert not content[row, n:].any()  # padding
        assert not content[row, n - 1]  # ours: [CLS] at the end; BERT: the final [SEP]
        if model.pool == "first":  # BERT: [CLS] at position 0
            assert not content[row, 0] and content[row, 1:n - 1].all()
        else:
            assert content[row, : n - 1].all()


@pytest.mark.parametrize("make", [_ours, _hf], ids=["ours", "hf"])
def test_cutoff_and_noise_never_touch_cls_or_padding(make):
    model, batch = make(), _batch()
    content = regularized.content_mask(model, batch["attention_mask"])
    torch.manual_seed(0)
    cut = regularized.cutoff_positions(content, ratio=0.5)
    assert not (cut & ~content).any()
    per_row = cut.sum(1)
    assert per_row.tolist() == [max(1, int(0.5 * n)) if n >= 2 else 0
                                for n in content.sum(1).tolist()]
    e = torch.randn(*batch["input_ids"].shape, 16)
    z = regularized.embedding_noise(e, content, eps=0.5)
    assert (z[~content] == 0).all() and (z[content] != 0).all() and z.abs().max() <= 0.5


def test_perturb_embeddings_replaces_the_embedding_output_and_cleans_up():
    for model in (_ours(), _hf()):
        batch = _batch()
        model.eval()
        with regularized.perturb_embeddings(model, lambda e: e * 0):
            blind = model(batch["input_ids"], batch["attention_mask"]).logits
        assert regularized.embedding_output_module(model)._forward_hooks == {}
        normal = model(batch["input_ids"], batch["attention_mask"]).logits
        assert not torch.allclose(blind, normal)


def test_regression_heads_are_refused():
    model = _ours(num_labels=1)
    for name, method in (("R-Drop", regularized.rdrop()), ("R3F", regularized.r3f()),
                         ("token cutoff", regularized.cutoff())):
        with pytest.raises(regularized.RegressionNotSupported, match=name):
            method.prepare(model)
    batch = _batch()
    batch["labels"] = batch["labels"].float()
    with pytest.raises(regularized.RegressionNotSupported):
        regularized.rdrop_loss(_ours(), batch)


def test_methods_train_end_to_end():
    from tutorial_lib.training import create_trainer

    batch = _batch()
    for method in (regularized.rdrop(), regularized.r3f(), regularized.cutoff()):
        model = _ours(dropout=0.1)
        method.prepare(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        trainer = create_trainer(model, opt, device=torch.device("cpu"), loss_fn=method.loss_fn)
        state = trainer.run([batch] * 3, max_epochs=1)
        assert torch.isfinite(torch.tensor(state.output))


# --- transfer sets ----------------------------------------------------------------------------


def test_with_transfer_adds_an_evaluation_and_keeps_each_methods_own_hooks():
    import dataclasses

    import pandas as pd

    from tutorial_lib.training import Method, create_trainer, default_loss

    own_calls = []
    methods = {"fine-tuning": {},
               "R-Drop": dataclasses.replace(regularized.rdrop(),
                                             on_trainer=lambda *a: own_calls.append(a))}
    sets = {"a": [_batch()], "b": [_batch(), {**_batch(), "labels": _batch()["labels"].flip(0)}]}
    wired, hooks = regularized.with_transfer(methods, 3, sets)
    assert list(wired) == list(hooks) == list(methods)
    assert all(isinstance(m, Method) for m in wired.values())
    assert methods["fine-tuning"] == {}  # the caller's methods are not changed
    assert wired["R-Drop"].loss_fn is methods["R-Drop"].loss_fn
    models = {}
    for name, method in wired.items():
        model = _ours()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        trainer = create_trainer(model, opt, device=torch.device("cpu"),
                                 loss_fn=method.loss_fn or default_loss)
        method.on_trainer(trainer, model, opt)
        trainer.run([_batch()] * 2, max_epochs=1)
        models[name] = model
        assert hooks[name].model is model
    assert len(own_calls) == 1 and own_calls[0][1] is models["R-Drop"]
    for name, model in models.items():
        model.eval()
        with torch.no_grad():
            errors = {}
            for set_name, loader in sets.items():
                wrong = sum(int((model(near(model, b["input_ids"]), near(model, b["attention_mask"]))
                                 .logits.argmax(-1).cpu() != b["labels"]).sum()) for b in loader)
                errors[f"{set_name}_error"] = wrong / sum(len(b["labels"]) for b in loader)
        assert hooks[name].records == [pytest.approx(errors)]
    table = pd.DataFrame({"method": ["fine-tuning", "R-Drop"], "seed": [0, 0]}, index=[7, 9])
    out = regularized.transfer_columns(table, hooks)
    assert list(out.columns) == ["method", "seed", "a_error", "b_error", "a_error_floor",
                                 "b_error_floor"]
    assert list(out.index) == [7, 9]
    # each set's floor: the error of its best constant guess (what stats.compare guards with)
    for name, loader in sets.items():
        labels = torch.cat([b["labels"] for b in loader]).tolist()
        best = max(labels.count(y) for y in set(labels)) / len(labels)
        assert out[f"{name}_error_floor"].tolist() == pytest.approx([1 - best] * 2)
    assert regularized.majority_error([{"labels": torch.tensor([1, 1, 0, 1])}]) == 0.25
    assert out.loc[9, "b_error"] == pytest.approx(hooks["R-Drop"].records[0]["b_error"])


def test_transfer_sets_encode_other_tasks_test_splits_for_the_backbone(with_data):
    from tutorial_lib.backbones import Backbone
    from tutorial_lib.models import TransformerLM
    from tutorial_lib.tasks import load_task
    from tutorial_lib.tokenization import train_wordpiece

    tok = train_wordpiece(["a good movie", "a bad film", "great fun"] * 20, vocab_size=80)
    cfg = TransformerConfig(vocab_size=len(tok), d_model=16, n_layer=1, n_head=2, d_ff=32,
                            max_len=24, pad_id=tok.pad_token_id)
    bb = Backbone("tiny", "causal", tok, TransformerLM(cfg), max_len=24)
    sst2 = load_task("sst2", train_examples=8, validation_examples=8, test_examples=8)
    loaders = regularized.transfer_sets(["mr", "cr"], bb, sst2, limit=20, batch_size=8)
    assert list(loaders) == ["mr", "cr"]
    for name, loader in loaders.items():
        batches = list(loader)
        assert sum(len(b["labels"]) for b in batches) == 20
        test = load_task(name).test
        for b in batches:
            last = b["attention_mask"].sum(1) - 1  # ours: [CLS] appended after the text
            assert (b["input_ids"][torch.arange(len(last)), last] == tok.cls_token_id).all()
            assert b["input_ids"].shape[1] <= 24 and set(b["labels"].tolist()) <= {0, 1}
        first = batches[0]["input_ids"][0, : int(batches[0]["attention_mask"][0].sum())].tolist()
        assert first in bb.encode(test["text"])  # a row of the *test* split
    again = regularized.transfer_sets(["mr"], bb, sst2, limit=20, batch_size=8)["mr"]
    assert [b["input_ids"].tolist() for b in again] == [b["input_ids"].tolist()
                                                        for b in loaders["mr"]]
    with pytest.raises(ValueError, match="labels"):
        regularized.transfer_sets(["trec"], bb, sst2)
