"""Sub-word tokenization: train a cased WordPiece vocabulary on the pretraining corpus.

The 2019 tutorial borrowed ``bert-base-cased``'s vocabulary (28,996 WordPieces). We train our own
with Hugging Face ``tokenizers`` in a few seconds, sized by the scale (a small vocabulary is the
cheapest speed-up on a CPU: the softmax over V dominates a small model's step). Users online can
load a hub tokenizer instead with :func:`load_hub_tokenizer`.

Special tokens and ids: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerBase:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )


def train_wordpiece(
    lines: Iterable[str], vocab_size: int, min_frequency: int = 2
) -> PreTrainedTokenizerBase:
    """Train a cased WordPiece tokenizer (BERT-style normalisation without lower-casing)."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS
    )
    tok.train_from_iterator(_batched(lines, 1000), trainer)
    return _wrap(tok)


def _batched(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def load_or_train_tokenizer(
    directory: Path, lines: Iterable[str], vocab_size: int
) -> PreTrainedTokenizerBase:
    """Load the tokenizer cached in ``directory``, or train one on ``lines`` and save it there."""
    if (directory / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(directory)
    os.environ.setdefault("RAYON_NUM_THREADS", str(os.cpu_count() or 1))
    tok = train_wordpiece(lines, vocab_size)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok.save_pretrained(tmp)
    shutil.rmtree(directory, ignore_errors=True)  # a half-written earlier attempt
    os.replace(tmp, directory)  # atomic: readers see no tokenizer or a whole one
    return AutoTokenizer.from_pretrained(directory)


def load_hub_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """A tokenizer from the Hugging Face Hub (e.g. ``bert-base-cased``); needs internet or HF cache."""
    try:
        return AutoTokenizer.from_pretrained(name)
    except OSError as err:
        raise OSError(
            f"could not load tokenizer {name!r} from the Hugging Face Hub or its local cache "
            f"({err.__class__.__name__}). Go online once to download it, or use the tokenizer "
            "trained by tutorial_lib.pretraining (the default)."
        ) from err


def clean_wikitext(line: str) -> str:
    """WikiText's tokenized release writes unknown words as ``<unk>``: map them to [UNK]."""
    return line.strip().replace("<unk>", "[UNK]")


def encode_with_cls(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_len: int
) -> list[list[int]]:
    """Token ids of each text with [CLS] **appended at the end** (the slides' fine-tuning input).

    Long texts are truncated to ``max_len - 1`` tokens before the [CLS] so it is never cut off.
    """
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [row[: max_len - 1] + [tokenizer.cls_token_id] for row in ids]
