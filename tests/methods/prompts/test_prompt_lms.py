"""Tests for tutorial_lib.methods.prompts.prompt_lms: frozen lower states reused by the top layers of a
causal LM (a tiny random Llama, no download)."""

import pytest
import torch
from transformers import LlamaConfig, LlamaModel

from tutorial_lib.methods.prompts import prompt_lms


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


class Extended(torch.nn.Module):
    """Token ids ≥ ``num_base`` read trainable vectors (as DART's embedding does)."""

    def __init__(self, base: torch.nn.Embedding, extra: int) -> None:
        super().__init__()
        self.base, self.num_base = base, base.num_embeddings
        self.extra = torch.nn.Parameter(torch.randn(extra, base.embedding_dim))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        is_extra = ids >= self.num_base
        out = self.base(ids.masked_fill(is_extra, 0))
        rows = self.extra[(ids - self.num_base).clamp(min=0)]
        return torch.where(is_extra[..., None], rows, out)


def decoder_with_vectors(layers: int = 4, extra: int = 3) -> LlamaModel:
    decoder = tiny_decoder(layers)
    decoder.embed_tokens = Extended(decoder.embed_tokens, extra)
    return decoder


def test_prompt_on_frozen_prefix_gives_the_whole_decoders_states_and_gradients():
    decoder = decoder_with_vectors()
    # text, then trainable vectors 50, 51, 52 (and a real token after them); the last row has a
    # vector before its text: its "rest" is longer, and must still come out right
    rows = [[5, 6, 7, 8, 50, 51, 52, 9], [10, 11, 50, 51, 52, 9], [12, 50, 13, 14, 51, 52, 9]]
    ids, mask = batch(rows)
    for p in decoder.parameters():
        p.requires_grad_(False)
    for p in [*decoder.layers[-1].parameters(), decoder.embed_tokens.extra]:
        p.requires_grad_(True)
    full = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
    (full * mask[..., None]).square().sum().backward()
    want = decoder.embed_tokens.extra.grad.clone()
    decoder.embed_tokens.extra.grad = None
    frozen = prompt_lms.FrozenPrefix(trainable_layers=1)
    wrapped = prompt_lms.PromptOnFrozen(decoder, frozen)
    got = wrapped(input_ids=ids, attention_mask=mask).last_hidden_state
    for i, r in enumerate(rows):
        torch.testing.assert_close(got[i, : len(r)], full[i, : len(r)], rtol=1e-5, atol=1e-5)
    (got * mask[..., None]).square().sum().backward()
    torch.testing.assert_close(decoder.embed_tokens.extra.grad, want, rtol=1e-4, atol=1e-5)
    assert set(frozen.cache) == {(5, 6, 7, 8), (10, 11), (12,)}
    # the prefixes are looked up, not recomputed: another batch, another order
    ids2, mask2 = batch([rows[1], rows[0]])
    again = wrapped(input_ids=ids2, attention_mask=mask2).last_hidden_state
    assert len(frozen.cache) == 3
    torch.testing.assert_close(again[0, :6], full[1, :6], rtol=1e-5, atol=1e-5)


def test_the_caches_keep_each_inputs_own_tokens_not_the_padded_batch():
    """A cached row must own its storage: a view of the batch's [B, width, D] output would keep
    every row's padding (and the other rows) alive for as long as the cache lives — in 09 the
    caches of whole-sentence inputs took hundreds of MiB more than their tokens."""
    decoder = decoder_with_vectors()
    rows = [[5, 6, 7, 8, 9, 10, 11, 50, 51], [12, 50, 51]]  # very different lengths
    ids, mask = batch(rows)
    with torch.no_grad():
        prompt_lms.TopLayers(decoder, states := prompt_lms.FrozenStates(2))(
            input_ids=ids.clamp(max=49), attention_mask=mask)
        prompt_lms.PromptOnFrozen(decoder, prefix := prompt_lms.FrozenPrefix(2))(
            input_ids=ids, attention_mask=mask)
    tensors = [*states.states.values(), *(t for entry in prefix.cache.values() for t in entry)]
    assert len(tensors) == 2 + 2 * 3
    for t in tensors:
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


def test_prompt_on_frozen_prefix_needs_trainable_vectors():
    wrapped = prompt_lms.PromptOnFrozen(tiny_decoder(), prompt_lms.FrozenPrefix(trainable_layers=1))
    ids, mask = batch([[5, 6]])
    try:
        wrapped(input_ids=ids, attention_mask=mask)
    except prompt_lms.PromptError as e:
        assert "trainable input vectors" in str(e)
    else:
        raise AssertionError("no error for a plain embedding")


def test_prompt_on_frozen_states_needs_a_frozen_layer():
    """With every layer trained there is nothing to cache: one clear error, not an empty stack."""
    with pytest.raises(prompt_lms.PromptError, match="all 2 layers train"):
        prompt_lms.PromptOnFrozen(tiny_decoder(layers=2), prompt_lms.FrozenPrefix(trainable_layers=2))
    prompt_lms.PromptOnFrozen(tiny_decoder(layers=2), prompt_lms.FrozenPrefix(trainable_layers=1))


def test_a_fresh_copy_for_a_partly_frozen_run_shares_only_the_frozen_weights():
    """09's runs train the top layers: a copy made for them copies those (and the final norm) and
    shares every other weight with the LM it came from; training it leaves that LM unchanged, and
    a later full copy trains everything again."""
    from tiny import tiny_llama_backbone

    lm = tiny_llama_backbone(["a good film", "a bad film"], layers=3)
    before = {n: p.detach().clone() for n, p in lm.lm.named_parameters()}
    own = prompt_lms.fresh_copy(lm, trainable_layers=1)
    prompt_lms.freeze_below(own, 1)
    shared = {n for (n, p), q in zip(lm.lm.named_parameters(), own.lm.parameters()) if p is q}
    assert shared and all(not n.startswith(("model.layers.2.", "model.norm.")) for n in shared)
    assert "model.layers.0.mlp.up_proj.weight" in shared and "model.embed_tokens.weight" in shared
    assert own.lm.model.layers[2].mlp.up_proj.weight is not lm.lm.model.layers[2].mlp.up_proj.weight
    assert own.lm.lm_head.weight is lm.lm.lm_head.weight  # the LM head is frozen: shared
    trained = [p for p in own.lm.parameters() if p.requires_grad]
    assert {id(p) for p in trained} == {id(p) for m in (own.lm.model.layers[2], own.lm.model.norm)
                                        for p in m.parameters()}
    ids = torch.tensor([[3, 4, 5, 6]])
    own.lm(input_ids=ids, labels=ids).loss.backward()
    with torch.no_grad():
        for p in trained:
            p.add_(1.0)
    for n, p in lm.lm.named_parameters():
        assert torch.equal(p, before[n]), n  # the original never moved
    full = prompt_lms.fresh_copy(lm)  # lm's shared weights were frozen by freeze_below above
    assert all(p.requires_grad for p in full.lm.parameters())
    assert not any(p is q for p, q in zip(full.lm.parameters(), lm.lm.parameters()))
