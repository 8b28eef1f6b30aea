"""Sub-word tokenization: train a cased WordPiece vocabulary on the pretraining corpus.

The 2019 tutorial borrowed ``bert-base-cased``'s vocabulary (28,996 WordPieces). We train our own
in a few seconds, sized by the scale (a small vocabulary is the cheapest speed-up on a CPU: the
softmax over V dominates a small model's step). Users online can load a hub tokenizer instead
with :func:`load_hub_tokenizer`.

The vocabulary is learned here, in :func:`learn_wordpiece_vocab`, rather than by the
``tokenizers`` library's ``WordPieceTrainer``: that trainer gives the continuing pieces (``##e``)
their ids in the iteration order of a Rust hash map, which is randomised in every process, and
breaks ties between equally frequent merges by those ids — so two trainings on the same corpus
gave the same tokens with different ids, sometimes different tokens, also single-threaded, and
two fresh caches gave different pretrained models from the same seeds. Ours is the same
algorithm (BPE merges over words split into a first character and ``##``-prefixed continuing
characters) with every order fixed by the strings themselves, so the saved files are identical,
byte for byte, whenever the corpus is. Tokenizing still runs in the ``tokenizers`` library.

Special tokens and ids: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4.
"""

from __future__ import annotations

import errno
import heapq
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from . import integrity
from .integrity import cache_lock

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CONTINUING_PREFIX = "##"


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerBase:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )


def _normalizer() -> normalizers.Normalizer:
    """BERT's normalisation without lower-casing or accent stripping (a cased vocabulary)."""
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )


def word_counts(lines: Iterable[str]) -> Counter[str]:
    """How often each pre-token (BERT's split on whitespace and punctuation) occurs."""
    normalizer, pre_tokenizer = _normalizer(), pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)))
    return counts


def _merge_word(symbols: list[str], a: str, b: str, merged: str) -> list[str]:
    """``symbols`` with every (left-to-right, non-overlapping) ``a b`` replaced by ``merged``."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_wordpiece_vocab(
    counts: Mapping[str, int],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
) -> list[str]:
    """The WordPiece vocabulary (index = id) learned from word counts, deterministically.

    Each word starts as its first character followed by ``##``-prefixed continuing characters;
    the most frequent adjacent pair is merged into a new token (``a`` + ``b`` without its ``##``)
    until the vocabulary has ``vocab_size`` tokens or no pair occurs ``min_frequency`` times.
    Order: special tokens, the characters (by code point), the continuing characters, then the
    merges in the order they were made; ties between equally frequent pairs go to the smaller
    pair of strings. Nothing depends on hashing or on the order of ``counts``.
    """
    words = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    freq = [n for _, n in words]
    symbols = [[w[0], *(CONTINUING_PREFIX + c for c in w[1:])] for w, _ in words if w]
    vocab: list[str] = []
    index: dict[str, int] = {}

    def add(token: str) -> None:
        if token not in index:
            index[token] = len(vocab)
            vocab.append(token)

    for token in special_tokens:
        add(token)
    for token in sorted({c for w, _ in words for c in w}):
        add(token)
    for token in sorted({t for s in symbols for t in s[1:]}):
        add(token)

    pair_counts: defaultdict[tuple[str, str], int] = defaultdict(int)
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    for i, s in enumerate(symbols):
        for pair in zip(s, s[1:]):
            pair_counts[pair] += freq[i]
            where[pair].add(i)
    heap = [(-n, pair) for pair, n in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        negative, pair = heapq.heappop(heap)
        count = pair_counts[pair]
        if -negative != count:  # a stale entry: counts only fall, so requeue the true count
            if count > 0:
                heapq.heappush(heap, (-count, pair))
            continue
        if count < max(min_frequency, 1):
            break
        a, b = pair
        merged = a + b.removeprefix(CONTINUING_PREFIX)
        add(merged)
        grown: set[tuple[str, str]] = set()
        for i in sorted(where.pop(pair, ())):
            old = symbols[i]
            new = _merge_word(old, a, b, merged)
            if len(new) == len(old):
                continue  # the pair left this word in an earlier merge
            for p in zip(old, old[1:]):
                pair_counts[p] -= freq[i]
            for p in zip(new, new[1:]):
                pair_counts[p] += freq[i]
                where[p].add(i)
                if merged in p:
                    grown.add(p)
            symbols[i] = new
        for p in sorted(grown):
            heapq.heappush(heap, (-pair_counts[p], p))
    return vocab


def train_wordpiece(
    lines: Iterable[str], vocab_size: int, min_frequency: int = 2
) -> PreTrainedTokenizerBase:
    """Train a cased WordPiece tokenizer (BERT-style normalisation without lower-casing).

    Deterministic: the same lines give the same tokens with the same ids (see the module notes).
    """
    vocab = learn_wordpiece_vocab(word_counts(lines), vocab_size, min_frequency=min_frequency)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]",
                                     continuing_subword_prefix=CONTINUING_PREFIX))
    tok.normalizer = _normalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix=CONTINUING_PREFIX)
    tok.add_special_tokens(SPECIAL_TOKENS)
    return _wrap(tok)


def load_or_train_tokenizer(
    directory: Path, lines: Iterable[str] | Callable[[], Iterable[str]], vocab_size: int
) -> PreTrainedTokenizerBase:
    """Load the tokenizer cached in ``directory``, or train one on ``lines`` and save it there.

    ``lines`` may be a function returning them, called only when training is needed. The files
    are saved with an integrity record; damaged ones are reported in one line and retrained.
    """
    directory = Path(directory)
    with cache_lock(directory):  # two processes sharing a cache train it once
        return _load_or_train(directory, lines, vocab_size)


def _load_or_train(directory: Path, lines: Iterable[str] | Callable[[], Iterable[str]],
                   vocab_size: int) -> PreTrainedTokenizerBase:
    if integrity.check_directory(directory, "tokenizer"):
        return AutoTokenizer.from_pretrained(directory)
    tok = train_wordpiece(lines() if callable(lines) else lines, vocab_size)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tok.save_pretrained(tmp)
        integrity.write_directory_record(tmp)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if integrity.is_disk_full(err):
            raise integrity.CacheWriteError(
                errno.ENOSPC, integrity.disk_full_message(directory, "Nothing that was already saved has "
                                                "been lost.")) from err
        raise
    shutil.rmtree(directory, ignore_errors=True)  # a damaged or half-written earlier attempt
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
