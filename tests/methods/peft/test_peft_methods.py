"""PEFT methods on tiny random BERT and Llama classifiers: what trains, the counts by formula,
the identity at initialisation, the optimizer's groups."""

import pytest
import torch
from tiny import tensors_equal
from tiny_peft import FAMILIES, batch, tiny_classifier

from tutorial_lib.methods.peft.peft_methods import (
    IA3,
    BitFit,
    Full,
    Houlsby,
    LoRA,
    PeftMethodError,
    PrefixTuning,
    PromptTuning,
    family,
    head_count,
    param_groups,
    trained_parameters,
)
from tutorial_lib.params import trainable_summary

METHODS = [LoRA(r=4, alpha=8), LoRA(r=4, alpha=8, ours=True), IA3(), PromptTuning(n_tokens=5),
           PrefixTuning(n_tokens=5), PrefixTuning(n_tokens=5, projection=16), Full(),
           Full(train_embeddings=False)]
BERT_ONLY = [BitFit(), Houlsby(bottleneck=4)]
CASES = [(f, m) for f in FAMILIES for m in METHODS] + [("bert", m) for m in BERT_ONLY]


def _id(case):
    f, m = case
    return f"{f}-{m!r}"


def logits(model, b):
    with torch.no_grad():
        return model.eval()(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_the_trained_count_matches_the_formula(case):
    fam, method = case
    model = tiny_classifier(fam)
    expected = method.expected_trainable(model)
    method.apply(model)
    assert trainable_summary(model).trainable == expected
    assert model.head.weight.requires_grad and model.head.bias.requires_grad  # the head trains


def test_the_lora_formula_by_hand():
    """r·(d_in + d_out) per adapted matrix: BERT q and v are 32 → 32; Llama's v is 32 → 16
    (2 key/value heads of 8), its q 32 → 32; 2 layers; a 32 → 3 head."""
    head = 32 * 3 + 3
    assert LoRA(r=4).expected_trainable(tiny_classifier("bert")) == 2 * 2 * 4 * 64 + head
    assert LoRA(r=4).expected_trainable(tiny_classifier("llama")) == 2 * 4 * (64 + 48) + head
    assert PrefixTuning(n_tokens=5).expected_trainable(tiny_classifier("llama")) == 5 * 2 * 2 * 16 + head
    assert IA3().expected_trainable(tiny_classifier("bert")) == 2 * (32 + 32 + 64) + head


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_only_the_methods_parameters_and_the_head_train(case):
    fam, method = case
    model = tiny_classifier(fam)
    method.apply(model)
    names = list(trained_parameters(model))
    kind = {"LoRA": ("lora_A", "lora_B") if not getattr(method, "ours", False) else (".A", ".B"),
            "(IA)³": ("ia3_l",), "prompt tuning": ("prompt_encoder",),
            "prefix tuning": ("prompt_encoder",), "BitFit": ("bias",),
            "adapters": ("adapter", "LayerNorm")}.get(method.label)
    if kind is None:  # full fine-tuning: everything but the pooler (and maybe the embeddings)
        emb = any("word_embeddings" in n or "embed_tokens" in n for n in names)
        assert emb == method.train_embeddings and not any("pooler" in n for n in names)
        return
    assert all(n.startswith("head.") or any(k in n for k in kind) for n in names), names
    assert {"head.weight", "head.bias"} <= set(names)


def test_bitfit_trains_every_bias_but_the_unused_poolers_and_nothing_else():
    model = BitFit().apply(tiny_classifier("bert"))
    for name, p in model.named_parameters():
        wanted = name.startswith("head.") or (name.endswith("bias") and "pooler" not in name)
        assert p.requires_grad == wanted, name


def test_bitfit_refuses_a_model_without_biases():
    with pytest.raises(PeftMethodError, match="no bias terms"):
        BitFit().apply(tiny_classifier("llama"))


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("method", [LoRA(r=4, alpha=8), LoRA(r=4, alpha=8, ours=True), IA3()],
                         ids=repr)
def test_lora_and_ia3_start_as_the_base_model_exactly(fam, method):
    """B = 0 (LoRA) and l = 1 ((IA)³): the adapted model computes the same logits, bit for bit."""
    b = batch()
    base, model = tiny_classifier(fam), tiny_classifier(fam)
    method.apply(model)
    assert tensors_equal(logits(model, b), logits(base, b))
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n or n.endswith(".B")]
    assert all(torch.count_nonzero(p) == 0 for p in lora_b)


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("method", [PromptTuning(n_tokens=5), PrefixTuning(n_tokens=5)], ids=repr)
def test_prompts_and_prefixes_change_the_output_and_keep_its_positions(fam, method):
    b = batch()
    base, model = tiny_classifier(fam), tiny_classifier(fam)
    method.apply(model)
    hidden = model.encoder(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
    assert hidden.last_hidden_state.shape[:2] == b["input_ids"].shape  # virtual tokens cut off
    assert not torch.allclose(logits(model, b), logits(base, b))


def test_prompt_tuning_pools_the_same_position_as_the_base_model():
    """The encoder's output drops the 5 virtual positions, so "last" pooling finds each row's last
    real token (and "first" BERT's [CLS]) where it was before."""
    model = PromptTuning(n_tokens=5).apply(tiny_classifier("llama"))
    b = batch()
    full = model.encoder.peft_model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
    cut = model.encoder(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
    assert tensors_equal(cut.last_hidden_state, full.last_hidden_state[:, 5:])


def test_param_groups_cover_the_trained_parameters_once_and_scale_the_heads_rate():
    model = LoRA(r=4).apply(tiny_classifier("bert"))
    groups = param_groups(model, weight_decay=0.01, head_lr_scale=10.0)
    ids = [id(p) for g in groups for p in g["params"]]
    trained = [id(p) for p in model.parameters() if p.requires_grad]
    assert sorted(ids) == sorted(trained) and len(ids) == len(set(ids))
    head = {id(p) for p in model.head.parameters()}
    for g in groups:
        in_head = {id(p) in head for p in g["params"]}
        assert len(in_head) == 1
        assert g.get("lr_scale", 1.0) == (10.0 if in_head == {True} else 1.0)
    assert sum(p.numel() for g in groups if g.get("name") == "head" for p in g["params"]) == \
        head_count(model)


def test_an_unknown_model_family_says_what_to_do():
    model = tiny_classifier("bert")
    model.encoder.config.model_type = "gpt2"
    with pytest.raises(PeftMethodError, match="targets="):
        family(model)
    # with its targets given, the method needs no family
    method = IA3(kv_targets=r".*\.attention\.self\.value", ff_targets=r".*\.layer\.\d+\.output\.dense")
    assert method.expected_trainable(model) == 2 * (32 + 64) + head_count(model)
    method.apply(model)
    assert trainable_summary(model).trainable == 2 * (32 + 64) + head_count(model)


def test_our_lora_targets_must_match_a_layer():
    with pytest.raises(ValueError, match="matches no linear layer"):
        LoRA(targets=r".*\.nothing", ours=True).apply(tiny_classifier("bert"))
