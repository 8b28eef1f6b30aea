"""Tests for tutorial_lib.methods.prompt_lms: frozen lower states reused by the top layers of a
causal LM (a tiny random Llama, no download)."""

import torch
from transformers import LlamaConfig, LlamaModel

from tutorial_lib.methods import prompt_lms


def tiny_decoder(layers: int = 4) -> LlamaModel:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaModel(cfg).eval()


def batch(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and their attention mask."""
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, mask


def test_top_layers_on_frozen_states_give_the_whole_decoders_states():
    decoder = tiny_decoder()
    rows = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16]]
    ids, mask = batch(rows)
    with torch.no_grad():
        full = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
    frozen = prompt_lms.FrozenStates(trainable_layers=2)
    top = prompt_lms.TopLayers(decoder, frozen)
    with torch.no_grad():
        first = top(input_ids=ids, attention_mask=mask).last_hidden_state
        # the same rows in another batch (other padding, other order): looked up, not recomputed
        ids2, mask2 = batch([rows[1], rows[0]])
        again = top(input_ids=ids2, attention_mask=mask2).last_hidden_state
    assert len(frozen.states) == 3
    for i, r in enumerate(rows):
        torch.testing.assert_close(first[i, : len(r)], full[i, : len(r)], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(again[0, :3], full[1, :3], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(again[1, :5], full[0, :5], rtol=1e-5, atol=1e-6)


def test_only_the_top_layers_receive_gradients():
    decoder = tiny_decoder()
    ids, mask = batch([[5, 6, 7], [8, 9]])
    top = prompt_lms.TopLayers(decoder, prompt_lms.FrozenStates(trainable_layers=1))
    top(input_ids=ids, attention_mask=mask).last_hidden_state.sum().backward()
    assert all(p.grad is None for p in decoder.layers[0].parameters())
    assert all(p.grad is not None for p in decoder.layers[-1].parameters())
    assert decoder.norm.weight.grad is not None
