"""Tests for tutorial_lib.backbones: one interface over ours and Hugging Face's networks."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch, tensors_equal, tiny_bert_classifier, tiny_classifier, tiny_llama_backbone
from transformers import LlamaConfig

from tutorial_lib import backbones, config, models, pretraining
from tutorial_lib.anatomy import layer_groups
from tutorial_lib.backbones import Backbone, BackboneError, layer_states
from tutorial_lib.config import CACHE_ENV_VAR, DATA_ENV_VAR
from tutorial_lib.models import SequenceClassifier, TransformerClassifier, TransformerLM
from tutorial_lib.pretraining_settings import PretrainingSettings

SMOKE = config.get_scale("smoke")
OURS_SMOKE = PretrainingSettings.at(SMOKE).model  # our model at the smoke scale
# Hugging Face backbones are loaded at a scale that keeps the real checkpoint (the scale decides
# nothing else for them; smoke may swap in tiny random networks for speed)
REAL_HUB = config.get_scale("classroom")
TEXTS = ["What is the capital of France ?", "Who wrote it ?"]


@pytest.fixture(scope="module")
def ours_env(data_dir, tmp_path_factory):
    """Local data and one cache for the module: "ours" is pretrained once (smoke: a few seconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV_VAR, str(data_dir))
        mp.setenv(CACHE_ENV_VAR, str(tmp_path_factory.mktemp("cache")))
        backbones.forget_loaded()
        with pytest.raises(BackboneError, match=r"pretraining\.ensure\(settings\)"):
            backbones.load_backbone("ours", SMOKE)  # loading never trains: an empty cache says so
        assert pretraining.ensure(SMOKE, "ours", "scratch").keys() == {"causal"}
        yield
        backbones.forget_loaded()  # prototypes from this cache must not serve other modules


def minilm() -> Backbone:
    try:
        return backbones.load_backbone("minilm", REAL_HUB)
    except BackboneError as err:
        pytest.skip(f"offline MiniLM not installed: {err}")


def batch_of(backbone: Backbone, texts=TEXTS) -> dict:
    from tutorial_lib.training import pad_collate

    return pad_collate(backbone.pad_id)([{"input_ids": ids} for ids in backbone.encode(texts)])


# --- ours ---------------------------------------------------------------------------------------


def test_scratch_is_our_architecture_with_seeded_random_weights(ours_env):
    a = backbones.load_backbone("scratch", SMOKE, seed=0)
    assert a.is_ours and a.kind == "causal" and a.pool == "last"
    assert (a.n_layers, a.hidden_size, a.max_len) == (OURS_SMOKE.n_layer, OURS_SMOKE.d_model,
                                                      OURS_SMOKE.max_len)
    same, other = (backbones.load_backbone("scratch", SMOKE, seed=s) for s in (0, 1))
    w = lambda b: b.lm.transformer.tok_emb.weight
    assert tensors_equal(w(a), w(same)) and not tensors_equal(w(a), w(other))


def test_ours_starts_from_the_pretrained_lm_and_appends_cls(ours_env):
    ours = backbones.load_backbone("ours", SMOKE)
    lm = pretraining.load_or_pretrain(SMOKE, "causal").model
    for (name, a), b in zip(ours.lm.state_dict().items(), lm.state_dict().values()):
        assert tensors_equal(a, b), name
    assert ours.is_ours and ours.kind == "causal" and ours.pool == "last"
    assert ours.lm_head is ours.lm.lm_head and ours.encoder is ours.lm.transformer
    cls = ours.tokenizer.cls_token_id
    ids = ours.encode(TEXTS)
    assert all(row[-1] == cls and cls not in row[:-1] for row in ids)  # [CLS] at the end only
    long = ours.encode([" ".join(TEXTS * 40)], max_len=10)[0]
    assert len(long) == 10 and long[-1] == cls  # truncation keeps it
    assert len(ours.encode([" ".join(TEXTS * 40)])[0]) == ours.max_len
    rows = ours.encode_rows({"text": TEXTS, "label": [3, 1]})
    assert rows == [{"input_ids": ids[0], "labels": 3}, {"input_ids": ids[1], "labels": 1}]


def test_ours_classifier_and_layer_states(ours_env):
    ours = backbones.load_backbone("ours", SMOKE)
    clf = ours.classifier(6).eval()
    assert isinstance(clf, TransformerClassifier)
    for a, b in zip(clf.encoder.parameters(), ours.lm.transformer.parameters()):
        assert tensors_equal(a, b)
    batch = batch_of(ours)
    with torch.no_grad():
        out = clf(batch["input_ids"], batch["attention_mask"])
        states = layer_states(ours.encoder.eval(), batch["input_ids"], batch["attention_mask"])
        top = layer_states(ours.encoder, batch["input_ids"], batch["attention_mask"], final=True)
    assert out.logits.shape == (2, 6)
    assert len(states) == ours.n_layers + 1 and len(top) == 1
    assert all(s.shape == (*batch["input_ids"].shape, ours.hidden_size) for s in states)
    torch.testing.assert_close(states[-1], top[0])
    # the top state pooled at the last real token is exactly what the classifier's head reads
    pooled = models.pool_hidden(states[-1], batch["attention_mask"], ours.pool)
    torch.testing.assert_close(pooled, clf.pooled(batch["input_ids"], batch["attention_mask"]))


def test_masked_ours_pools_its_cls_at_the_end_too(ours_env):
    """Our masked LM (built by hand: pretraining it here would double the module's time) still
    has its [CLS] appended at the end, so it pools the last token, not the first."""
    ours = backbones.load_backbone("ours", SMOKE)
    cfg = dataclasses.replace(ours.lm.config, causal=False)
    mlm = Backbone("ours-mlm", "masked", ours.tokenizer, TransformerLM(cfg), ours.max_len)
    assert mlm.is_ours and mlm.pool == "last"
    assert mlm.encode(TEXTS)[0][-1] == mlm.tokenizer.cls_token_id
    assert not backbones.is_causal(mlm.encoder)


def test_two_loads_are_independent_copies(ours_env):
    a, b = (backbones.load_backbone("ours", SMOKE) for _ in range(2))
    assert a.lm is not b.lm
    before = b.lm.transformer.tok_emb.weight.detach().clone()
    with torch.no_grad():
        a.lm.transformer.tok_emb.weight.add_(1.0)
    assert tensors_equal(b.lm.transformer.tok_emb.weight, before)
    assert tensors_equal(backbones.load_backbone("ours", SMOKE).lm.transformer.tok_emb.weight, before)
    # the tie between embeddings and LM head survives the copy
    assert a.lm.lm_head.weight is a.lm.transformer.tok_emb.weight


def test_a_first_load_leaves_the_callers_random_numbers_alone(ours_env):
    """A seeded run must not depend on whether its backbone was already loaded in the process."""
    import random

    import numpy as np

    from tutorial_lib.runtime import seed_everything

    def draws_after_load() -> tuple:
        seed_everything(0)
        backbones.load_backbone("scratch", SMOKE, seed=5)
        return torch.rand(3).tolist(), random.random(), float(np.random.rand())

    backbones.forget_loaded()
    first = draws_after_load()  # builds the prototype: a random init
    assert draws_after_load() == first  # from the cache: no random numbers drawn
    seed_everything(0)
    assert (torch.rand(3).tolist(), random.random(), float(np.random.rand())) == first


def test_a_tiny_hub_network_is_the_same_wherever_it_is_first_loaded(ours_env):
    """At smoke a Hugging Face backbone is a random network of its class: its weights must not
    depend on the caller's random state when the first load happens (a notebook that loads it in a
    demo cell, unseeded, and one that loads it first inside a seeded run must train the same model;
    without a seed of its own it did not, and smoke runs differed from process to process)."""
    if not backbones.model_path("minilm").joinpath("config.json").is_file():
        pytest.skip("offline MiniLM not installed")

    def first_load(state: int) -> torch.Tensor:
        backbones.forget_loaded()
        torch.manual_seed(state)
        return backbones.load_backbone("minilm", SMOKE).encoder.embeddings.word_embeddings.weight

    assert SMOKE.tiny_hub_models
    assert tensors_equal(first_load(1), first_load(2))
    backbones.forget_loaded()


# --- Hugging Face --------------------------------------------------------------------------------


def test_minilm_is_an_offline_bert_encoder():
    m = minilm()
    assert not m.is_ours and m.kind == "encoder" and m.pool == "first"
    assert (m.n_layers, m.hidden_size) == (6, 384)
    ids = m.encode(TEXTS)
    tok = m.tokenizer
    assert all(row[0] == tok.cls_token_id and row[-1] == tok.sep_token_id for row in ids)  # BERT
    batch = batch_of(m)
    clf = m.classifier(3).eval()
    assert type(clf) is SequenceClassifier and clf.pool == "first"
    assert not clf.encoder.get_input_embeddings().weight.requires_grad  # word embeddings frozen
    with torch.no_grad():
        out = clf(**batch, labels=torch.tensor([0, 2]))
        states = layer_states(m.encoder, batch["input_ids"], batch["attention_mask"])
    assert out.logits.shape == (2, 3) and out.loss.ndim == 0
    assert len(states) == m.n_layers + 1 == 7
    torch.testing.assert_close(states[-1][:, 0], clf.pooled(batch["input_ids"], batch["attention_mask"]))
    assert backbones.model_path("minilm").joinpath("config.json").is_file()
    assert backbones.model_path("bert-base-uncased") == "bert-base-uncased"  # a Hub id: itself


def test_minilm_has_no_masked_head():
    m = minilm()
    with pytest.raises(BackboneError, match="no LM head"):
        _ = m.lm_head
    with pytest.raises(BackboneError, match="no masked head"):
        backbones.load_backbone("minilm", REAL_HUB, kind="masked")


def test_a_missing_offline_package_or_hub_model_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(backbones.LOCAL_MODELS, "ghost", backbones.LocalModel(
        "no_such_package_xyz", "pip install no-such-package-xyz==1.0", "encoder"))
    with pytest.raises(BackboneError, match="pip install no-such-package-xyz==1.0"):
        backbones.load_backbone("ghost", REAL_HUB)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackboneError, match="could not load 'no-such-org/no-such-model'.*offline backbone"):
        backbones.load_backbone("no-such-org/no-such-model", REAL_HUB)


def test_causal_hugging_face_backbone_pools_its_last_token():
    llama = tiny_llama_backbone(TEXTS)
    assert llama.pool == "last" and backbones.is_causal(llama.encoder)
    assert llama.n_layers == 2 and llama.hidden_size == 16
    assert llama.lm_head is llama.lm.lm_head
    ids = llama.encode(TEXTS)
    assert all(row[-1] == llama.tokenizer.eos_token_id for row in ids)  # a fixed last position
    assert len(llama.encode([" ".join(TEXTS * 20)], max_len=8)[0]) == 8
    clf = llama.classifier(4).eval()
    assert type(clf) is SequenceClassifier and clf.pool == "last"
    batch = batch_of(llama)
    pad = torch.full((2, 5), llama.pad_id)
    with torch.no_grad():
        logits = clf(batch["input_ids"], batch["attention_mask"]).logits
        padded = clf(torch.cat([batch["input_ids"], pad], 1),
                     torch.cat([batch["attention_mask"], torch.zeros_like(pad)], 1)).logits
        alone = clf(batch["input_ids"][1:, : len(ids[1])], batch["attention_mask"][1:, : len(ids[1])]).logits
        states = layer_states(llama.encoder, batch["input_ids"], batch["attention_mask"])
    assert logits.shape == (2, 4) and len(states) == 3
    torch.testing.assert_close(logits, padded, rtol=1e-5, atol=1e-5)  # right padding is invisible
    torch.testing.assert_close(logits[1:], alone, rtol=1e-5, atol=1e-5)  # pooled at its own last token


def test_hf_classifier_with_one_output_is_regression():
    clf = tiny_bert_classifier(num_labels=1).eval()
    b = padded_batch()
    y = torch.tensor([0.5, 4.0, 2.0, 1.0])
    out = clf(b["input_ids"], b["attention_mask"], labels=y)
    assert out.logits.shape == (4, 1)
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), y))


def test_pool_hidden_and_hidden_size():
    hidden = torch.arange(2 * 4 * 1.0).view(2, 4, 1)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    assert models.pool_hidden(hidden, mask, "last").flatten().tolist() == [1.0, 7.0]
    assert models.pool_hidden(hidden, mask, "first").flatten().tolist() == [0.0, 4.0]
    assert models.pool_hidden(hidden, mask, "mean").flatten().tolist() == [0.5, 5.5]
    with pytest.raises(ValueError, match="pool"):
        models.pool_hidden(hidden, mask, "max")
    # the Hugging Face contract, spoken by ours too: no caller asks which family it has
    assert tiny_classifier().encoder.config.hidden_size == 16
    assert tiny_bert_classifier().encoder.config.hidden_size == 16
    assert backbones.is_causal(tiny_classifier().encoder)
    assert backbones.default_pool(tiny_classifier().encoder) == "last"
    assert backbones.default_pool(tiny_bert_classifier().encoder) == "first"
    assert not backbones.is_causal(tiny_bert_classifier().encoder)


# --- layers, top-down -----------------------------------------------------------------------------


def covers_every_parameter_once(model, layers) -> bool:
    ids = [id(p) for layer in layers for p in layer.parameters()]
    return len(ids) == len(set(ids)) and set(ids) == {id(p) for p in model.parameters()}


def test_layer_groups_of_ours_are_top_down_and_cover_every_parameter_once():
    model = tiny_classifier(n_layer=3)
    assert isinstance(model, SequenceClassifier) and model.pool == "last"
    layers = layer_groups(model)
    assert [layer.name for layer in layers] == ["head", "ln_f", "block 3", "block 2", "block 1",
                                                "embeddings"]
    assert covers_every_parameter_once(model, layers)
    merged = layer_groups(model, merge_final_norm=True)
    assert [layer.name for layer in merged][:2] == ["head", "block 3 + ln_f"]
    assert covers_every_parameter_once(model, merged)
    # the tied lm_head is the token embedding: in "embeddings", not a layer of its own
    assert model.lm_head.weight is model.encoder.tok_emb.weight
    assert any(p is model.lm_head.weight for p in merged[-1].parameters())


def test_layer_groups_of_bert():
    model = tiny_bert_classifier()
    layers = layer_groups(model)
    assert [layer.name for layer in layers] == ["head", "layer 1", "embeddings"]
    # every parameter once, except BERT's pooler: SequenceClassifier reads the hidden state, never the
    # pooler's output, so the pooler belongs to no layer (it never gets a gradient either)
    ids = [id(p) for layer in layers for p in layer.parameters()]
    missing = {n.split(".")[1] for n, p in model.named_parameters() if id(p) not in ids}
    assert len(ids) == len(set(ids)) and missing == {"pooler"}
    assert [layer.name for layer in layer_groups(model, merge_final_norm=True)] == [
        "head", "layer 1", "embeddings"]  # BERT has no final norm to merge


def test_layer_groups_of_a_llama_decoder():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16)
    from transformers import LlamaModel

    model = SequenceClassifier(LlamaModel(cfg), num_labels=3, pool="last")
    layers = layer_groups(model)
    assert [layer.name for layer in layers] == ["head", "norm", "layer 2", "layer 1", "embeddings"]
    assert covers_every_parameter_once(model, layers)
    merged = layer_groups(model, merge_final_norm=True)
    assert [layer.name for layer in merged] == ["head", "layer 2 + norm", "layer 1", "embeddings"]
    assert covers_every_parameter_once(model, merged)


def test_layer_groups_refuse_an_unknown_model():
    with pytest.raises(TypeError, match="Linear"):
        layer_groups(torch.nn.Linear(2, 2))


def test_layer_groups_of_our_language_model_put_the_tied_output_layer_first():
    """A language model's head is its output layer (18's LM stage with discriminative rates):
    tied to the token embeddings, so that parameter sits in the head and the embeddings both, and
    ``layer_param_groups`` keeps it in the first (the head's full rate)."""
    lm = TransformerLM(tiny_classifier(n_layer=2).config)
    layers = layer_groups(lm, merge_final_norm=True)
    assert [layer.name for layer in layers] == ["head", "block 2 + ln_f", "block 1", "embeddings"]
    assert layers[0].parameters()[0] is lm.transformer.tok_emb.weight
    assert {id(p) for layer in layers for p in layer.parameters()} == {id(p) for p in lm.parameters()}


def test_classifier_reads_the_pool_it_is_given_and_refuses_an_unknown_one():
    llama = tiny_llama_backbone(TEXTS)
    assert llama.classifier(2).pool == "last"
    assert llama.classifier(2, pool="mean").pool == "mean"
    with pytest.raises(ValueError, match="pool must be one of"):
        llama.classifier(2, pool="max")
