"""Tests for tutorial_lib.tokenization."""

import os
import subprocess
import sys
from pathlib import Path

from tutorial_lib.tokenization import (
    SPECIAL_TOKENS,
    clean_wikitext,
    encode_with_cls,
    learn_wordpiece_vocab,
    load_or_train_tokenizer,
    train_wordpiece,
)

REPO = Path(__file__).resolve().parents[1]

LINES = ["The Cat sat on the mat .", "the cat ate the Mouse ."] * 200


def test_special_token_ids_and_case():
    tok = train_wordpiece(LINES, vocab_size=120)
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (tok.pad_token_id, tok.cls_token_id, tok.mask_token_id) == (0, 2, 4)
    assert tok.tokenize("Cat cat") == ["Cat", "cat"]  # cased: two different tokens


def test_wikitext_unk_becomes_the_unk_token():
    tok = train_wordpiece(LINES, vocab_size=120)
    line = clean_wikitext(" the <unk> sat \n")
    assert line == "the [UNK] sat"
    assert tok.tokenize(line) == ["the", "[UNK]", "sat"]


def test_cls_is_appended_at_the_end_and_survives_truncation():
    tok = train_wordpiece(LINES, vocab_size=120)
    short, long = encode_with_cls(tok, ["the cat", " ".join(["the cat"] * 20)], max_len=8)
    assert short[-1] == tok.cls_token_id and len(short) == 3
    assert len(long) == 8 and long[-1] == tok.cls_token_id


def test_tokenizer_is_cached(tmp_path):
    first = load_or_train_tokenizer(tmp_path / "tok", LINES, 120)
    again = load_or_train_tokenizer(tmp_path / "tok", [], 120)  # no lines: must come from disk
    assert first.get_vocab() == again.get_vocab()
    assert not (tmp_path / "tok.tmp").exists()


def test_vocabulary_learning_is_ordered_by_strings_not_by_hashing():
    """Bug guarded: the tokenizers library's trainer numbered the ##-pieces in hash-map order and
    broke ties between equally frequent merges by those numbers (ids changed from run to run)."""
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3, "wide": 3}
    vocab = learn_wordpiece_vocab(counts, vocab_size=40)
    shuffled = dict(reversed(list(counts.items())))
    assert learn_wordpiece_vocab(shuffled, vocab_size=40) == vocab
    assert vocab[:5] == SPECIAL_TOKENS
    alphabet = sorted(set("".join(counts)))
    assert vocab[5 : 5 + len(alphabet)] == alphabet  # characters by code point
    pieces = vocab[5 + len(alphabet) :]
    n_continuing = len({"##" + c for w in counts for c in w[1:]})
    assert pieces[:n_continuing] == sorted(pieces[:n_continuing])  # then the ## pieces, sorted
    # "##e ##s" (9 = 6 + 3) and "##s ##t" (9) tie; the smaller pair of strings is merged first
    assert pieces[n_continuing] == "##es"
    assert len(vocab) == len(set(vocab))


def test_two_trainings_from_empty_caches_write_byte_identical_files(with_data, tmp_path):
    """The same corpus gives the same tokenizer files, byte for byte — also in another process
    with another hash seed (the second cache is filled by a subprocess)."""
    from tutorial_lib import config, pretraining

    pretraining.get_tokenizer(config.get_scale("smoke"))
    first = next((tmp_path / "cache" / "smoke").glob("tokenizer-*"))
    # PYTHONPATH keeps what it held: on the GPU machine the kit's packages (datasets, ...) are
    # there, and a subprocess that lost them failed to import (H200, 2026-11-27)
    env = dict(os.environ, TUTORIAL_CACHE_DIR=str(tmp_path / "other"), PYTHONHASHSEED="123",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    subprocess.run([sys.executable, "-c", "from tutorial_lib import config, pretraining; "
                    "pretraining.get_tokenizer(config.get_scale('smoke'))"],
                   check=True, env=env, cwd=REPO, capture_output=True, timeout=120)
    second = tmp_path / "other" / "smoke" / first.name
    names = sorted(p.name for p in first.iterdir())
    assert "tokenizer.json" in names and names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
