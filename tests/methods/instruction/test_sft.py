"""Tests of tutorial_lib.methods.instruction.sft on a tiny random Llama (no Hub): LoRA starts at
the pretrained model, trains only its own matrices (in the top layers when asked), and SFT through
the one recipe lowers the response loss on the rows it trained on."""

from __future__ import annotations

import copy

import pytest
import torch
from tiny import word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from tutorial_lib.floors import Floor
from tutorial_lib.methods.instruction import instructions, sft, zeroshot
from tutorial_lib.methods.instruction.instructions import Item
from tutorial_lib.settings import Budget
from tutorial_lib.training import pad_collate

WORDS = "is it good ? the plot was dull film great yes no".split()
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS)


def tiny_lm(tok, layers: int = 3) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                      bos_token_id=None, eos_token_id=None, pad_token_id=1)
    return LlamaForCausalLM(cfg).eval()


ROWS = [("is it good ?", "yes"), ("the plot was dull", "no"), ("film great", "yes"), ("dull film", "no")]


def test_lora_starts_at_the_pretrained_model_and_trains_only_its_own_matrices(tok):
    lm = tiny_lm(tok)
    x = torch.tensor([[3, 7, 8, 9, 10]])
    with torch.no_grad():
        before = lm(input_ids=x).logits
    model = sft.with_lora(copy.deepcopy(lm), r=4, alpha=8.0)
    with torch.no_grad():
        assert torch.allclose(model(input_ids=x).logits, before)
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert {n.split(".")[-4] for n in trained} == {"q_proj", "v_proj"}


def test_top_layers_adapts_only_the_top_layers(tok):
    model = sft.with_lora(tiny_lm(tok, layers=3), top_layers=1)
    layers = {int(n.split("layers.")[1].split(".")[0])
              for n, p in model.named_parameters() if p.requires_grad}
    assert layers == {2}


def test_sft_lowers_the_response_loss_and_the_disabled_adapter_is_the_pretrained_model(tok):
    lm = tiny_lm(tok)
    rows = [instructions.render(tok, p, r) for p, r in ROWS]
    batch = pad_collate(tok.pad_token_id)(rows)
    with torch.no_grad():
        start = zeroshot.response_loss(lm, batch).item()
    model = sft.with_lora(copy.deepcopy(lm), r=4, alpha=8.0, targets=("q_proj", "v_proj", "o_proj"))
    fitted = sft.finetune(model, rows * 4, seed=0, budget=Budget(epochs=3, batch_size=4, lr=3e-2),
                          pad_id=tok.pad_token_id)
    assert len(fitted.history.train) == 12  # the one recipe's history: every step
    model.eval()
    with torch.no_grad():
        end = zeroshot.response_loss(model, batch).item()
        with model.disable_adapter():
            reference = zeroshot.response_loss(model, batch).item()
    assert end < start - 0.1
    assert reference == pytest.approx(start, abs=1e-5)


def test_a_run_records_each_heldout_tasks_accuracy(tok):
    rows = [instructions.render(tok, p, r) for p, r in ROWS]
    items = {"t": [Item("t", "is it good ?", ("yes", "no"), 0), Item("t", "dull film", ("yes", "no"), 1)]}
    run = sft.run(tiny_lm(tok), tok, rows, items, {"t": Floor(0.5)}, seed=0,
                  budget=Budget(epochs=1, batch_size=2, lr=1e-2), lora={"r": 2, "alpha": 4.0},
                  keep_model=True)
    assert set(run.columns) == {"t"} and run.scores["t"]["floor"] == 0.5
    assert 0 < run.trainable_params < run.total_params and run.model is not None


def test_example_losses_are_each_rows_response_loss_and_a_run_keeps_them_on_dev_rows(tok):
    rows = [instructions.render(tok, p, r) for p, r in ROWS]
    model = tiny_lm(tok)
    losses = sft.example_losses(model, rows, pad_id=tok.pad_token_id, batch_size=2)
    collate = pad_collate(tok.pad_token_id)
    for row, loss in zip(rows, losses):
        with torch.no_grad():
            assert loss == pytest.approx(float(zeroshot.response_loss(model, collate([row]))), abs=1e-5)
    items = {"t": [Item("t", "is it good ?", ("yes", "no"), 0)]}
    run = sft.run(tiny_lm(tok), tok, rows, items, {"t": Floor(0.5)}, seed=0, dev_rows=rows[:2],
                  budget=Budget(epochs=2, batch_size=2, lr=1e-2), lora={"r": 2, "alpha": 4.0})
    assert len(run.scores["dev"]["losses"]) == 2 and set(run.columns) == {"t"}
