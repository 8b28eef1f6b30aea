"""Tests for tutorial_lib.regularized: R-Drop, R3F, token cutoff and their shared pieces."""

import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch as _batch
from tiny import tiny_bert_classifier as _hf

from tutorial_lib import regularized
from tutorial_lib.hf_models import HFClassifier
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
        if isinstance(model, HFClassifier):
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
    for name, kwargs in (("R-Drop", regularized.rdrop()), ("R3F", regularized.r3f()),
                         ("token cutoff", regularized.cutoff())):
        with pytest.raises(regularized.RegressionNotSupported, match=name):
            kwargs["prepare"](model)
    batch = _batch()
    batch["labels"] = batch["labels"].float()
    with pytest.raises(regularized.RegressionNotSupported):
        regularized.rdrop_loss(_ours(), batch)


def test_methods_train_end_to_end():
    from tutorial_lib.training import create_trainer

    batch = _batch()
    for kwargs in (regularized.rdrop(), regularized.r3f(), regularized.cutoff()):
        model = _ours(dropout=0.1)
        kwargs["prepare"](model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        trainer = create_trainer(model, opt, device=torch.device("cpu"), loss_fn=kwargs["loss_fn"])
        state = trainer.run([batch] * 3, max_epochs=1)
        assert torch.isfinite(torch.tensor(state.output))
