"""Tests for tutorial_lib.models: each one fails on the bug it names."""

import pytest
import torch

from tutorial_lib.models import (
    IGNORE_INDEX,
    ModelError,
    TransformerClassifier,
    TransformerConfig,
    TransformerLM,
    count_parameters,
    last_token,
    load_pretrained,
    pool_hidden,
    save_pretrained,
)

V = 50


def cfg(**kw) -> TransformerConfig:
    base = dict(vocab_size=V, d_model=32, n_layer=2, n_head=4, d_ff=64, max_len=16, dropout=0.0)
    base.update(kw)
    return TransformerConfig(**base)


def test_causal_mask_future_token_does_not_change_past_logits():
    """Bug guarded: a missing/wrong causal mask lets position t see token t+1."""
    torch.manual_seed(0)
    model = TransformerLM(cfg(causal=True)).eval()
    ids = torch.randint(5, V, (2, 10))
    changed = ids.clone()
    t = 4
    changed[:, t + 1] = (ids[:, t + 1] + 7) % V
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
    assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


def test_bidirectional_model_does_see_the_future():
    model = TransformerLM(cfg(causal=False)).eval()
    ids = torch.randint(5, V, (1, 8))
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 3) % V
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits[:, :5], model(changed).logits[:, :5])


@pytest.mark.parametrize("causal", [True, False])
def test_cls_logits_do_not_change_with_more_padding(causal):
    """Bug guarded: pad keys attended to, or [CLS] read at a fixed/padded position."""
    torch.manual_seed(0)
    model = TransformerClassifier(cfg(causal=causal), num_labels=3).eval()
    ids = torch.tensor([[7, 8, 9, 2], [7, 8, 2, 0]])  # right-padded, [CLS]=2 at the end
    mask = (ids != 0).long()
    pad = torch.zeros(2, 5, dtype=torch.long)
    with torch.no_grad():
        short = model(ids, mask).logits
        long = model(torch.cat([ids, pad], 1), torch.cat([mask, pad], 1)).logits
    torch.testing.assert_close(short, long, rtol=1e-5, atol=1e-5)
    # and the second row equals the same sentence encoded alone without any padding
    with torch.no_grad():
        alone = model(ids[1:, :3], mask[1:, :3]).logits
    torch.testing.assert_close(short[1:], alone, rtol=1e-5, atol=1e-5)


def test_weight_tying_holds_after_save_and_load(tmp_path):
    model = TransformerLM(cfg())
    assert model.lm_head.weight is model.transformer.tok_emb.weight
    save_pretrained(model, tmp_path)
    loaded = load_pretrained(tmp_path, causal=True)
    assert loaded.lm_head.weight is loaded.transformer.tok_emb.weight
    for (k, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), k
    # tying still holds after an optimiser step
    opt = torch.optim.SGD(loaded.parameters(), lr=1.0)
    ids = torch.randint(5, V, (2, 8))
    loaded(ids, labels=ids).loss.backward()
    opt.step()
    assert torch.equal(loaded.lm_head.weight, loaded.transformer.tok_emb.weight)


def test_load_refuses_mismatched_checkpoints(tmp_path):
    with pytest.raises(ModelError, match="no checkpoint"):
        load_pretrained(tmp_path / "missing")
    save_pretrained(TransformerLM(cfg(causal=False)), tmp_path)
    with pytest.raises(ModelError, match="masked LM"):
        load_pretrained(tmp_path, causal=True)


def test_init_gives_near_uniform_first_prediction():
    """Bug guarded: N(0,1) embeddings + tied head -> loss ~150 and denormal-slow CPU steps."""
    torch.manual_seed(0)
    model = TransformerLM(cfg(vocab_size=1000))
    ids = torch.randint(5, 1000, (4, 16))
    loss = model(ids, labels=ids).loss.item()
    assert abs(loss - torch.log(torch.tensor(1000.0)).item()) < 0.5


def test_mlm_loss_only_on_masked_positions():
    model = TransformerLM(cfg(causal=False)).eval()
    ids = torch.randint(5, V, (2, 8))
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, 3] = ids[0, 3]
    out = model(ids, labels=labels)
    assert out.logits.shape == (1, V)


def test_classifier_from_lm_copies_the_transformer():
    lm = TransformerLM(cfg())
    clf = TransformerClassifier.from_lm(lm, num_labels=6)
    for a, b in zip(lm.transformer.parameters(), clf.encoder.parameters()):
        assert torch.equal(a, b)
    assert clf.head.out_features == 6


def test_count_parameters_counts_tied_weights_once():
    model = TransformerLM(cfg())
    direct = sum(p.numel() for p in set(model.parameters()))
    assert count_parameters(model) == direct
    for p in model.transformer.blocks[0].parameters():
        p.requires_grad_(False)
    frozen = sum(p.numel() for p in model.transformer.blocks[0].parameters())
    assert count_parameters(model, trainable_only=True) == direct - frozen


def test_last_token_reads_the_last_real_position_of_each_row():
    hidden = torch.arange(2 * 5 * 1.0).view(2, 5, 1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert last_token(hidden, mask).flatten().tolist() == [2.0, 9.0]


def test_mean_pooling_averages_only_the_real_tokens():
    hidden = torch.arange(2 * 5 * 1.0).view(2, 5, 1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert pool_hidden(hidden, mask, "mean").flatten().tolist() == [1.0, 7.0]
    with pytest.raises(ValueError, match="pool must be one of"):
        pool_hidden(hidden, mask, "max")


def test_notebook_02s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_pooling():
    """Notebook 02's self-check, run as the learner would: the stub is reported, the solution passes
    against ``pool_hidden`` on cases of both pools, and two plausible mistakes fail: the last
    position of the padded row, and the mean over every position."""
    from notebook_selfcheck import LearnerRun

    from tutorial_lib import models

    run = LearnerRun("02_adaptation", {"models": models}, "my_pool", "random_batch", models.pool_hidden, n=8)
    assert {pool for _, _, pool in run.cases()} == {"first", "last"}
    assert any((mask == 0).any() for _, mask, pool in run.cases() if pool == "last")  # padded rows
    run.fails({"the padded row's last position": lambda h, m, p: h[:, 0] if p == "first" else h[:, -1],
               "the mean over every position": lambda h, m, p: h[:, 0] if p == "first" else h.mean(1)})
