"""Every helper feeds a model on the model's own device: the bugs the first GPU run found
(results/gpu/smoke_tests.json, 2026-11-27: "Expected all tensors to be on the same device" in
notebooks 01, 07, 10, 13, 15 and 16), caught here on a CPU.

A CPU-only machine has no second device to mix up, so the model goes to PyTorch's ``meta`` device
(shapes without values) as the stand-in for a GPU: a forward pre-hook records where each input is
and where the model is. A helper that builds its inputs on the CPU, or leaves the model behind
while it moves the batch, shows a mismatch, as it would crash on a GPU. Whatever comes after the
first forward may fail (meta tensors cannot be read): only the devices seen by then count."""

import pytest
import torch

from tests.methods.generation.test_dialogue_training import TURNS, make_model
from tests.methods.generation.test_dialogue_training import tok as _tok  # noqa: F401  (the fixture)
from tests.methods.multitask.test_gradts import BUILDERS, batch, loss_of
from tests.tiny import padded_batch, tiny_classifier, tiny_llama_backbone
from tutorial_lib import pretraining, training
from tutorial_lib.methods.generation import dialogue_training
from tutorial_lib.methods.multitask import gradts_fg
from tutorial_lib.methods.probing import probing
from tutorial_lib.models import TransformerConfig, TransformerLM
from tutorial_lib.runtime import device_of
from tutorial_lib.tokenization import train_wordpiece

META = torch.device("meta")
pytestmark = pytest.mark.usefixtures("one_thread")


def fed(model: torch.nn.Module, call) -> set[tuple[str, str]]:
    """(input device, model device) of every tensor ``call`` passes to ``model``'s forward."""
    seen: list[tuple[str, str]] = []

    def hook(module, args, kwargs):
        here = str(device_of(module))
        values = [*args, *kwargs.values()]
        values += [v for d in values if isinstance(d, dict) for v in d.values()]  # a batch dict
        seen.extend((str(t.device), here) for t in values if torch.is_tensor(t))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        call()
    except (RuntimeError, NotImplementedError, ValueError):
        pass  # meta tensors hold no values: what comes after the forward may fail
    finally:
        handle.remove()
    assert seen, "the model was never called"
    return set(seen)


def tiny_lm(causal: bool, where: torch.device = META):
    tok = train_wordpiece(["the cat sat on the mat and the dog ran"] * 20, vocab_size=60)
    cfg = TransformerConfig(vocab_size=len(tok), d_model=16, n_layer=2, n_head=2, d_ff=32, max_len=16,
                            dropout=0.0, causal=causal, pad_id=tok.pad_token_id)
    return TransformerLM(cfg).to(where), tok


def test_fit_trains_the_model_where_it_puts_the_batches():
    model = tiny_classifier()  # on the CPU; fit is told to train on another device
    run = lambda: training.fit(model, [padded_batch()], lr=1e-3, steps=1, schedule=None,  # noqa: E731
                               device=META, amp_dtype=None)
    assert fed(model, run) == {("meta", "meta")}


@pytest.mark.parametrize("causal", [True, False])
def test_generate_and_fill_mask_feed_the_model_on_its_device(causal):
    model, tok = tiny_lm(causal)
    if causal:
        call = lambda: pretraining.generate(model, tok, "the cat", max_new_tokens=2)  # noqa: E731
    else:
        call = lambda: pretraining.fill_mask(model, tok, f"the {tok.mask_token} sat")  # noqa: E731
    assert fed(model, call) == {("meta", "meta")}


def test_attention_maps_feed_the_model_on_its_device():
    model, _ = tiny_lm(True)
    ids, mask = torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.long)
    assert fed(model.base_model, lambda: probing.attention_maps(model, ids, mask)) == {("meta", "meta")}


def test_backbone_features_feed_the_lm_on_its_device():
    backbone = tiny_llama_backbone(["the cat sat on the mat"])
    backbone.lm.to(META)
    ids, mask = torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.long)
    assert fed(backbone.encoder, lambda: backbone.features(ids, mask)) == {("meta", "meta")}


def test_instance_importance_moves_each_batch_to_the_model():
    model = BUILDERS["ours"]().to(META)
    assert fed(model, lambda: gradts_fg.instance_importance(model, [batch()], loss_of(model))) \
        == {("meta", "meta")}


def test_dialogue_evaluation_moves_the_model_with_the_batches(_tok, monkeypatch):  # noqa: F811
    model = make_model(_tok, 1)
    states = [dialogue_training.turn_states(model, _tok, t, amp_dtype=None) for t in TURNS]
    monkeypatch.setattr(dialogue_training, "device", lambda: META)
    monkeypatch.setattr(dialogue_training, "autocast_dtype", lambda dev=None: None)
    decoder = model.lm.get_decoder()  # the top layers run on each context, then its candidates
    assert fed(decoder, lambda: dialogue_training.evaluate(model, states, "mc", batch_size=2)) \
        == {("meta", "meta")}


# --- the helpers whose tests fed a GPU model CPU tensors on the H200 (their own inputs since) -----


def test_position_logits_feed_the_token_classifier_on_its_device(monkeypatch):
    from tests.tiny import tiny_encoder
    from tutorial_lib.methods.token_tasks import token_tasks as tt

    model = tt.TokenClassifier(tiny_encoder(40), num_labels=3, dropout=0.0)  # on the CPU
    monkeypatch.setattr(tt, "device", lambda: META)  # the library puts it on "the GPU"
    monkeypatch.setattr(tt, "autocast_dtype", lambda dev=None: None)
    call = lambda: tt.position_logits(model, [[7, 8, 9], [12]], pad_id=0, batch_size=2)  # noqa: E731
    assert fed(model, call) == {("meta", "meta")}


def test_probing_features_feed_the_encoder_on_its_device(monkeypatch):
    from tutorial_lib.backbones import Backbone

    model, tok = tiny_lm(False, where=torch.device("cpu"))  # the library puts it on "the GPU"
    backbone = Backbone("tiny", "masked", tok, model, 16)
    monkeypatch.setattr(probing, "device", lambda: META)
    monkeypatch.setattr(probing, "autocast_dtype", lambda dev=None: None)
    call = lambda: list(probing.states_by_length(backbone, [[5, 6, 7], [5]], batch_size=2))  # noqa: E731
    assert fed(backbone.encoder, call) == {("meta", "meta")}


def test_stage_two_penalties_take_their_snapshot_to_the_weights_device():
    """L2-SP/EWC's anchor and Fisher, and LwF's frozen teacher, may stay on the CPU while fit puts
    the model on the GPU (the forgetting tests of the H200 run)."""
    from tutorial_lib.methods.forgetting import forgetting

    params = {"w": torch.nn.Parameter(torch.ones(3, device=META))}
    anchor, fisher = {"w": torch.zeros(3)}, {"w": torch.ones(3)}  # on the CPU
    assert forgetting.anchored_penalty(params, 1.0, anchor, fisher).device == META
    teacher = tiny_classifier().to(META)
    batch = padded_batch()  # on the CPU, as the student's batch need not be where the teacher is
    call = lambda: forgetting.lwf_term(None, torch.zeros(4, 3), batch, teacher, 1.0, 2.0)  # noqa: E731
    assert fed(teacher, call) == {("meta", "meta")}
