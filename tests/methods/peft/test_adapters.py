"""Tests for tutorial_lib.methods.peft.adapters: near-identity at init, only adapters/head/LNs train."""

import pytest
import torch
from tiny import tensors_equal
from transformers import BertConfig, BertModel

from tutorial_lib.methods.peft.adapters import (
    Adapter,
    adapter_modules,
    add_adapters,
    freeze_for_adapters,
    prepare_adapters,
)
from tutorial_lib.models import SequenceClassifier, TransformerClassifier, TransformerConfig
from tutorial_lib.params import trainable_summary


def _clf() -> TransformerClassifier:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=50, d_model=32, n_layer=2, n_head=2, d_ff=64, max_len=12,
                            dropout=0.0)
    return TransformerClassifier(cfg, num_labels=3)


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (8, 10), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "labels": torch.randint(0, 3, (8,), generator=g)}


def test_adapter_is_near_identity_at_init_and_fills_both_slots():
    model = _clf().eval()
    batch = _batch()
    with torch.no_grad():
        before = model(**batch).logits
        added = add_adapters(model, bottleneck=4)
        after = model(**batch).logits
    assert len(added) == 2 * model.config.n_layer
    for block in model.encoder.blocks:
        assert isinstance(block.adapter_attn, Adapter) and isinstance(block.adapter_ff, Adapter)
    assert (after - before).abs().max().item() < 1e-3
    assert not tensors_equal(after, before), "the adapters are really in the forward pass"


def test_frozen_backbone_only_adapters_head_and_layer_norms_change():
    model = _clf()
    add_adapters(model, bottleneck=4)
    freeze_for_adapters(model, train_layer_norms=True)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                            weight_decay=0.1)
    for _ in range(3):
        model(**_batch()).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for name, p in model.named_parameters():
        changed = not tensors_equal(before[name], p.detach())
        expected = ("adapter" in name or name.startswith("head.") or ".ln" in name)
        assert changed == expected, name
    n_adapter = sum(p.numel() for a in adapter_modules(model) for p in a.parameters())
    n_ln = sum(p.numel() for n, p in model.named_parameters() if ".ln" in n)
    assert trainable_summary(model).trainable == n_adapter + n_ln + 32 * 3 + 3


def test_adapters_wrap_a_hugging_face_bert_and_start_near_identity():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16)
    model = SequenceClassifier(BertModel(cfg), num_labels=3).eval()
    batch = _batch()
    with torch.no_grad():
        before = model(**batch).logits
        added = add_adapters(model, bottleneck=4)
        after = model(**batch).logits
    assert len(added) == 4
    assert (after - before).abs().max().item() < 1e-3
    freeze_for_adapters(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("adapter" in n for n in trainable) and any(n.startswith("head.") for n in trainable)
    assert all("adapter" in n or "LayerNorm" in n or n.startswith("head.") for n in trainable)


def test_prepare_hook_adds_then_freezes_and_a_model_without_blocks_is_an_error():
    model = _clf()
    prepare_adapters(4, train_layer_norms=False)(model)
    assert len(adapter_modules(model)) == 2 * model.config.n_layer
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("adapter" in n or n.startswith("head.") for n in trainable)
    with pytest.raises(TypeError, match="no Transformer blocks"):
        add_adapters(torch.nn.Linear(4, 4), bottleneck=2)


def test_train_embeddings_option_unfreezes_them():
    model = _clf()
    add_adapters(model, bottleneck=4)
    freeze_for_adapters(model, train_layer_norms=False, train_embeddings=True)
    assert model.encoder.tok_emb.weight.requires_grad and model.encoder.pos_emb.weight.requires_grad
    assert not model.encoder.blocks[0].attn.qkv.weight.requires_grad


def test_notebook_03s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_adapters():
    """Notebook 03's self-check, run as the learner would: the stub is reported, the solution passes,
    and three plausible mistakes fail (no skip connection, ReLU, the tanh approximation of GELU).
    The reference is the library's Adapter with the case's weights."""
    import torch.nn.functional as F
    from notebook_selfcheck import LearnerRun

    from tutorial_lib.methods.peft import adapters

    run = LearnerRun("03_adapters_and_freezing", {"torch": torch, "adapters": adapters}, "my_adapter",
                     "random_adapter", "adapter_reference")
    ref = run.reference
    for h, W_down, b_down, W_up, b_up in run.cases():  # the reference is Adapter with the case's weights
        a = Adapter(W_down.shape[1], W_down.shape[0])
        a.load_state_dict({"down.weight": W_down, "down.bias": b_down, "up.weight": W_up, "up.bias": b_up})
        with torch.no_grad():
            assert tensors_equal(a(h), ref(h, W_down, b_down, W_up, b_up))
    def adapter(act):
        return lambda h, Wd, bd, Wu, bu: h + act(h @ Wd.T + bd) @ Wu.T + bu

    run.fails({"no skip": lambda h, Wd, bd, Wu, bu: F.gelu(h @ Wd.T + bd) @ Wu.T + bu,
               "ReLU": adapter(F.relu), "tanh GELU": adapter(lambda x: F.gelu(x, approximate="tanh"))})
