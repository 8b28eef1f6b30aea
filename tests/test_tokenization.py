"""Tests for tutorial_lib.tokenization."""

from tutorial_lib.tokenization import (
    SPECIAL_TOKENS,
    clean_wikitext,
    encode_with_cls,
    load_or_train_tokenizer,
    train_wordpiece,
)

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
