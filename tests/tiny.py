"""Tiny models and batches shared by the method tests (no data, milliseconds to build)."""

from collections.abc import Sequence

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    BertConfig,
    BertModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from tutorial_lib.backbones import Backbone
from tutorial_lib.models import (
    SequenceClassifier,
    TransformerClassifier,
    TransformerConfig,
    TransformerLM,
)
from tutorial_lib.tokenization import train_wordpiece


def tiny_classifier(n_layer: int = 3, vocab_size: int = 50) -> TransformerClassifier:
    """Our classifier, d=16, no dropout, seeded."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=vocab_size, d_model=16, n_layer=n_layer, n_head=2, d_ff=32,
                            max_len=12, dropout=0.0)
    return TransformerClassifier(cfg, num_labels=3)


def tiny_bert_classifier(num_labels: int = 3) -> SequenceClassifier:
    """A randomly initialised 1-layer BERT wrapped like MiniLM (the Hugging Face path)."""
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return SequenceClassifier(BertModel(cfg), num_labels, dropout=0.0)


def tiny_encoder(vocab_size: int, hidden: int = 32) -> BertModel:
    """A randomly initialised 1-layer BERT encoder (the Hugging Face path), no dropout, seeded."""
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertModel(cfg)


def padded_batch(num_labels: int = 3) -> dict:
    """4 right-padded rows of lengths 8, 6, 3, 5 over a vocabulary of 40, with labels."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 40, (4, 8), generator=g)
    lengths = torch.tensor([8, 6, 3, 5])
    mask = (torch.arange(8)[None] < lengths[:, None]).long()
    return {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask,
            "labels": torch.randint(0, num_labels, (4,), generator=g)}


def kill_at(monkeypatch, module, iteration: int) -> None:
    """Make the next trainer that ``module.create_trainer`` builds raise KeyboardInterrupt after
    ``iteration`` iterations (a simulated kill); ``monkeypatch.undo()`` ends it."""
    from ignite.engine import Events

    original = module.create_trainer

    def crashing(*args, **kwargs):
        trainer = original(*args, **kwargs)

        @trainer.on(Events.ITERATION_COMPLETED(once=iteration))
        def _kill(_):
            raise KeyboardInterrupt("simulated kill")

        return trainer

    monkeypatch.setattr(module, "create_trainer", crashing)


def word_tokenizer(words: Sequence[str]) -> PreTrainedTokenizerFast:
    """One token per word of ``words``; the ChatML markers are special tokens, as in SmolLM2's
    tokenizer (the dialogue tests' tokenizer: no Hub)."""
    specials = ["[UNK]", "[PAD]", "<|im_start|>", "<|im_end|>"]
    vocab = {w: i for i, w in enumerate([*specials, "system", "user", "assistant", *words])}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]")


def tiny_llama_backbone(texts: Sequence[str], layers: int = 2) -> Backbone:
    """A tiny random Llama causal LM with a WordPiece vocabulary of ``texts``, wrapped by hand
    (stands in for SmolLM2: no conversion, no Hub)."""
    tok = train_wordpiece([" ".join(texts)] * 20, vocab_size=80)
    tok.eos_token = "[SEP]"
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=32, architectures=["LlamaForCausalLM"])
    return Backbone("tiny-llama", "causal", tok, LlamaForCausalLM(cfg).eval(), 32)


def tensors_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``torch.equal`` across devices: a trained model may sit on the GPU and a reloaded copy (or a
    reference built in the test) on the CPU (TUTORIAL_TEST_DEVICE=cuda, tests/conftest.py)."""
    return torch.equal(a.detach().cpu(), b.detach().cpu())


def near(module: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    """``t`` on ``module``'s device: a test's own input for a model the library may have moved to
    the GPU (TUTORIAL_TEST_DEVICE=cuda)."""
    return t.to(next(module.parameters()).device)


QUESTIONS = ["what is the capital of france ?", "who wrote hamlet ?", "how far is the moon ?",
             "when did the war end ?", "what does a cat eat ?", "where is the river nile ?"]


def tiny_ours(texts: Sequence[str] = QUESTIONS) -> Backbone:
    """Our causal LM, d=16, 2 blocks, no dropout, seeded, with a WordPiece vocabulary of ``texts``
    (notebook 18's LM stage and classifiers without notebook 01's cache)."""
    tok = train_wordpiece(list(texts) * 5, vocab_size=120)
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tok), d_model=16, n_layer=2, n_head=2, d_ff=32,
                            max_len=16, dropout=0.0)
    return Backbone("ours", "causal", tok, TransformerLM(cfg), 16)
