"""Parsers of the local copy's files (the layout of its ``MANIFEST.md``).

Each ``parse_*`` function takes the root of the local copy and returns a
:class:`datasets.DatasetDict` in the schema of :mod:`.schema`. Files are read as they are;
checking them against their sha256 is :mod:`.verify`'s job, done before any parser runs.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features

from .errors import DataError
from .schema import (
    CONLL2003_FEATURES,
    CONLL_CHUNK,
    CONLL_NER,
    CONLL_POS,
    CONVAI2_FEATURES,
    MNLI_FEATURES,
    SQUAD_FEATURES,
    SST5_NAMES,
    TREC_COARSE,
    TREC_FEATURES,
    TREC_FINE,
    UD_FEATURES,
    UPOS,
    single_label_features,
    text_features,
)

SENTEVAL_SPLIT_SEED = 0
"""Seed of the fixed 80/10/10 split of MR, CR, MPQA and SUBJ (never change it)."""

CONVAI2_SPLIT_SEED = 0
"""Seed of the fixed by-dialogue split of ConvAI2's validation dialogues (never change it)."""
CONVAI2_SPLIT_SIZES = {"validation": 100, "test": 200}
"""Dialogues of ConvAI2's official validation split that become our dev and test sets; the other
700 are the local training set (online, the official training split is used instead)."""

Parser = Callable[[Path], DatasetDict]
_UPOS_TAGS = frozenset(UPOS)

# ------------------------------------------------------------------------ file helpers


def read_lines(path: Path, encoding: str = "utf-8", keepends: bool = False) -> list[str]:
    """Lines of a (possibly gzipped) text file; splits on newlines only."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding=encoding, newline=None) as f:
        if keepends:
            return list(f)
        return [line.rstrip("\n") for line in f]


def label_index(value: str, names: list[str], where: str) -> int:
    """Index of a label given by name or by integer string; DataError otherwise."""
    if value in names:
        return names.index(value)
    if value.lstrip("-").isdigit() and 0 <= int(value) < len(names):
        return int(value)
    raise DataError(f"unexpected label {value!r} in {where}; expected one of {names}")


def from_columns(columns: dict[str, list[Any]], features: Features) -> Dataset:
    """Build an in-memory Dataset with the given schema (columns in schema order)."""
    return Dataset.from_dict({c: columns[c] for c in features}, features=features)


# ---------------------------------------------------------------------------- WikiText


def parse_wikitext(root: Path) -> DatasetDict:
    """WikiText-2 tokenized: one row per line; blank lines -> "" (like the Hub config)."""
    files = {"train": "train.txt.gz", "validation": "valid.txt", "test": "test.txt"}
    out = {}
    for split, fname in files.items():
        lines = read_lines(root / "wikitext-2" / fname, keepends=True)
        rows = [line if line.strip() else "" for line in lines]
        out[split] = from_columns({"text": rows}, text_features())
    return DatasetDict(out)


# -------------------------------------------------------------------------------- TREC


def parse_trec_file(path: Path) -> dict[str, list[Any]]:
    """``COARSE:fine question ...`` lines (latin-1) -> text / coarse / fine label ints."""
    cols: dict[str, list[Any]] = {"text": [], "coarse_label": [], "fine_label": []}
    for n, line in enumerate(read_lines(path, encoding="latin-1"), start=1):
        # One stray byte (0xF0 in "sister\xf0city") is a broken separator: make it a space.
        label, _, text = line.replace("\xf0", " ").strip().partition(" ")
        if not label:
            continue
        where = f"{path}:{n}"
        cols["text"].append(text)
        cols["coarse_label"].append(label_index(label.split(":")[0], TREC_COARSE, where))
        cols["fine_label"].append(label_index(label, TREC_FINE, where))
    return cols


def parse_trec(root: Path) -> DatasetDict:
    """TREC train_5500 / TREC_10, labels mapped by name to the CogComp order."""
    files = {"train": "train_5500.label", "test": "TREC_10.label"}
    return DatasetDict(
        {
            s: from_columns(parse_trec_file(root / "trec" / f), TREC_FEATURES)
            for s, f in files.items()
        }
    )


# -------------------------------------------------------------------------------- GLUE


def read_tsv(
    path: Path, encoding: str = "utf-8", header: list[str] | None = None
) -> list[dict[str, str]]:
    """Rows of a GLUE TSV as dicts; split on tabs only (quotes are ordinary characters).

    ``header=None`` takes the column names from the first line. QQP has one row whose last
    tab is a space (``... jlpt5? 0``): such a row is repaired by splitting the trailing label
    off; other rows with the wrong number of fields raise :class:`DataError`.
    """
    lines = [line for line in read_lines(path, encoding=encoding) if line]
    if header is None:
        header, lines = lines[0].split("\t"), lines[1:]
    rows = []
    for n, line in enumerate(lines, start=2):
        fields = line.split("\t")
        if len(fields) == len(header) - 1:
            match = re.fullmatch(r"(.*) (-?\d+)", fields[-1])
            if match:
                fields = [*fields[:-1], match.group(1), match.group(2)]
        if len(fields) != len(header):
            raise DataError(
                f"{path}: line {n} has {len(fields)} fields, expected {len(header)}; "
                "re-copy the file from the source listed in MANIFEST.md"
            )
        rows.append(dict(zip(header, fields, strict=True)))
    return rows


@dataclass(frozen=True)
class GlueFile:
    """How one GLUE file maps to the HF columns."""

    fname: str
    text_cols: Mapping[str, str]  # HF column -> column in the file
    label_col: str | None = None
    idx_col: str | None = None
    header: tuple[str, ...] | None = None
    encoding: str = "utf-8"


def glue_split(path: Path, spec: GlueFile, features: Features) -> Dataset:
    """Read one GLUE TSV into the HF schema (test files get label -1)."""
    header = list(spec.header) if spec.header else None
    rows = read_tsv(path, encoding=spec.encoding, header=header)
    label_feature = features["label"]
    cols: dict[str, list[Any]] = {c: [r[src] for r in rows] for c, src in spec.text_cols.items()}
    if spec.label_col is None:
        cols["label"] = [-1.0 if label_feature.dtype == "float32" else -1] * len(rows)
    elif isinstance(label_feature, ClassLabel):
        cols["label"] = [
            label_index(r[spec.label_col], label_feature.names, f"{path}:{n}")
            for n, r in enumerate(rows, start=2)
        ]
    else:
        cols["label"] = [float(r[spec.label_col]) for r in rows]
    cols["idx"] = [int(r[spec.idx_col]) for r in rows] if spec.idx_col else list(range(len(rows)))
    return from_columns(cols, features)


def glue_parser(folder: str, files: Mapping[str, GlueFile], features: Features) -> Parser:
    """A local parser for one GLUE task folder."""

    def parse(root: Path) -> DatasetDict:
        return DatasetDict(
            {
                s: glue_split(root / "glue" / folder / f.fname, f, features)
                for s, f in files.items()
            }
        )

    return parse


def parse_mnli(root: Path) -> DatasetDict:
    """MNLI matched dev (JSONL premise/hypothesis/label names) -> ``validation``."""
    path = root / "glue" / "MNLI" / "dev_matched.jsonl"
    names = MNLI_FEATURES["label"].names
    cols: dict[str, list[Any]] = {"premise": [], "hypothesis": [], "label": [], "idx": []}
    for n, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        cols["premise"].append(row["premise"])
        cols["hypothesis"].append(row["hypothesis"])
        cols["label"].append(label_index(row["label"], names, f"{path}:{n}"))
        cols["idx"].append(len(cols["idx"]))
    return DatasetDict({"validation": from_columns(cols, MNLI_FEATURES)})


# ------------------------------------------------------------------------ SentEval, SST-5


def senteval_split(ds: Dataset) -> DatasetDict:
    """Fixed stratified 80/10/10 train/validation/test split (seed SENTEVAL_SPLIT_SEED)."""
    first = ds.train_test_split(test_size=0.2, seed=SENTEVAL_SPLIT_SEED, stratify_by_column="label")
    second = first["test"].train_test_split(
        test_size=0.5, seed=SENTEVAL_SPLIT_SEED, stratify_by_column="label"
    )
    return DatasetDict(
        {"train": first["train"], "validation": second["train"], "test": second["test"]}
    )


def senteval_parser(
    folder: str, files_by_label: Mapping[str, str], names: list[str], encoding: str = "utf-8"
) -> Parser:
    """A local parser for one SentEval binary set (one file per label, one sentence a line)."""

    def parse(root: Path) -> DatasetDict:
        cols: dict[str, list[Any]] = {"text": [], "label": []}
        for label_name, fname in files_by_label.items():
            lines = read_lines(root / "senteval" / folder / fname, encoding=encoding)
            texts = [line.strip() for line in lines if line.strip()]
            cols["text"] += texts
            cols["label"] += [names.index(label_name)] * len(texts)
        return senteval_split(from_columns(cols, single_label_features(names)))

    return parse


def parse_sst5(root: Path) -> DatasetDict:
    """SST-5 ``<label> <sentence>`` files -> train/validation/test."""
    files = {"train": "sentiment-train", "validation": "sentiment-dev", "test": "sentiment-test"}
    out = {}
    for split, fname in files.items():
        path = root / "senteval" / "SST-5" / fname
        cols: dict[str, list[Any]] = {"text": [], "label": []}
        for n, line in enumerate(read_lines(path), start=1):
            if not line.strip():
                continue
            label, _, text = line.partition(" ")
            cols["label"].append(label_index(label, SST5_NAMES, f"{path}:{n}"))
            cols["text"].append(text.strip())
        out[split] = from_columns(cols, single_label_features(SST5_NAMES))
    return DatasetDict(out)


# ---------------------------------------------------------------------------- UD EWT


def conllu_sentences(path: Path) -> Iterator[tuple[dict[str, str], list[list[str]]]]:
    """``(comments, word lines)`` per sentence; multiword ranges (1-2) and empty nodes (8.1)
    are skipped, so the words are the syntactic words of the sentence."""
    meta: dict[str, str] = {}
    words: list[list[str]] = []
    for n, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            if words:
                yield meta, words
            meta, words = {}, []
        elif line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                meta[key.strip()] = value.strip()
        else:
            fields = line.split("\t")
            if len(fields) != 10 or (fields[0].isdigit() and fields[3] not in _UPOS_TAGS):
                raise DataError(f"{path}:{n}: not a valid CoNLL-U word line")
            if fields[0].isdigit():
                words.append(fields)
    if words:
        yield meta, words


def parse_conllu(path: Path) -> dict[str, list[Any]]:
    """CoNLL-U -> one row per sentence, in the columns of ``UD_FEATURES``."""
    cols: dict[str, list[Any]] = {c: [] for c in UD_FEATURES}
    upos_index = {tag: i for i, tag in enumerate(UPOS)}
    for meta, words in conllu_sentences(path):
        cols["sent_id"].append(meta.get("sent_id", ""))
        cols["text"].append(meta.get("text", ""))
        cols["tokens"].append([w[1] for w in words])
        cols["upos"].append([upos_index[w[3]] for w in words])
        cols["xpos"].append([w[4] for w in words])
        cols["head"].append([int(w[6]) for w in words])
        cols["deprel"].append([w[7] for w in words])
    return cols


def parse_ud(root: Path) -> DatasetDict:
    """UD English-EWT train/dev/test CoNLL-U files."""
    files = {
        "train": "en_ewt-ud-train.conllu.gz",
        "validation": "en_ewt-ud-dev.conllu",
        "test": "en_ewt-ud-test.conllu",
    }
    return DatasetDict(
        {
            s: from_columns(parse_conllu(root / "ud-english-ewt" / f), UD_FEATURES)
            for s, f in files.items()
        }
    )


# ---------------------------------------------------------------------------- CoNLL-2003


def conll_sentences(path: Path) -> Iterator[list[list[str]]]:
    """The sentences of a CoNLL-2003 file as lists of ``[word, POS, chunk, NER]`` lines.

    A blank line ends a sentence; ``-DOCSTART-`` lines (document starts) are skipped. The same
    reader serves the IOB1 ``eng.*`` files and the IOB2 copy.
    """
    words: list[list[str]] = []
    for n, line in enumerate(read_lines(path, encoding="ascii"), start=1):
        fields = line.split()
        if not fields:
            if words:
                yield words
            words = []
        elif fields[0] != "-DOCSTART-":
            if len(fields) != 4:
                raise DataError(f"{path}:{n}: expected 4 columns (word POS chunk NER), got {line!r}")
            words.append(fields)
    if words:
        yield words


def parse_conll_file(path: Path) -> dict[str, list[Any]]:
    """One IOB2 CoNLL-2003 file -> the columns of ``CONLL2003_FEATURES`` (tags by name)."""
    index = [{tag: i for i, tag in enumerate(names)} for names in (CONLL_POS, CONLL_CHUNK, CONLL_NER)]
    cols: dict[str, list[Any]] = {c: [] for c in CONLL2003_FEATURES}
    for k, words in enumerate(conll_sentences(path)):
        cols["id"].append(str(k))
        cols["tokens"].append([w[0] for w in words])
        for col, table, field in zip(("pos_tags", "chunk_tags", "ner_tags"), index, (1, 2, 3)):
            try:
                cols[col].append([table[w[field]] for w in words])
            except KeyError as err:
                raise DataError(f"{path}: sentence {k} has the unknown {col} {err}") from err
    return cols


def parse_conll2003(root: Path) -> DatasetDict:
    """CoNLL-2003 English, the IOB2 copy: train / validation (testa) / test (testb)."""
    files = {"train": "train.txt.gz", "validation": "valid.txt.gz", "test": "test.txt.gz"}
    return DatasetDict(
        {
            s: from_columns(parse_conll_file(root / "conll2003" / "iob2" / f), CONLL2003_FEATURES)
            for s, f in files.items()
        }
    )


# -------------------------------------------------------------------------------- SQuAD


def parse_squad_file(path: Path) -> dict[str, list[Any]]:
    """A SQuAD v1.1 JSON file (articles > paragraphs > questions) -> one row per question."""
    with open(path, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    cols: dict[str, list[Any]] = {c: [] for c in SQUAD_FEATURES}
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                cols["id"].append(qa["id"])
                cols["title"].append(article["title"])
                cols["context"].append(paragraph["context"])
                cols["question"].append(qa["question"])
                cols["answers"].append(
                    {
                        "text": [a["text"] for a in qa["answers"]],
                        "answer_start": [a["answer_start"] for a in qa["answers"]],
                    }
                )
    return cols


SQUAD_FILES = {
    "train": "train-v1.1.first11articles.json",
    "validation": "dev-v1.1.reconstructed.json",
}
"""The local SQuAD copy: train is a SUBSET (the first 11 of 442 articles, 3,807 of 87,599
questions); validation is the whole dev set (10,570 questions), rebuilt, with 3,833 of its
34,726 answer offsets inferred (EM/F1 use answer texts only; see the folder's README)."""


def parse_squad(root: Path) -> DatasetDict:
    """SQuAD v1.1: ``train`` (local: the 11-article subset) and ``validation`` (the dev set)."""
    return DatasetDict(
        {
            s: from_columns(parse_squad_file(root / "squad-v1.1" / f), SQUAD_FEATURES)
            for s, f in SQUAD_FILES.items()
        }
    )


# ----------------------------------------------------------------------------- ConvAI2


def parse_convai2_lines(lines: list[str], where: str) -> dict[str, list[Any]]:
    """ParlAI's ConvAI2 text format -> one row per dialogue (the columns of CONVAI2_FEATURES).

    A line ``1 ...`` starts a dialogue; ``N your persona: <sentence>`` lines come first, then
    ``N <partner>\t<gold reply>\t<reward>\t<cand 1>|...|<cand 20>``. ``history`` is every
    utterance before the reply (the partner's last); the gold reply must be the last candidate.
    """
    cols: dict[str, list[Any]] = {"personality": [], "utterances": []}
    history: list[str] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        num, _, text = line.partition(" ")
        if num == "1":
            cols["personality"].append([])
            cols["utterances"].append([])
            history = []
        if not cols["personality"]:
            raise DataError(f"{where}:{n}: the file does not start a dialogue with turn 1")
        if text.startswith("your persona: "):
            cols["personality"][-1].append(text[len("your persona: "):])
            continue
        fields = text.split("\t")
        if len(fields) != 4 or fields[3].split("|")[-1] != fields[1]:
            raise DataError(f"{where}:{n}: not a ConvAI2 turn (partner, reply, reward, candidates "
                            "with the reply last); re-copy the file listed in MANIFEST.md")
        partner, reply, _reward, candidates = fields
        history.append(partner)
        cols["utterances"][-1].append({"candidates": candidates.split("|"), "history": list(history)})
        history.append(reply)
    return cols


def parse_convai2(root: Path) -> DatasetDict:
    """ConvAI2's validation file (the only split in the local copy) -> ``validation``."""
    path = root / "convai2" / "valid_self_original.txt.gz"
    return DatasetDict(
        {"validation": from_columns(parse_convai2_lines(read_lines(path), str(path)), CONVAI2_FEATURES)}
    )


def split_by_dialogue(dd: DatasetDict) -> DatasetDict:
    """train / validation / test of ConvAI2, split **by dialogue** (no dialogue in two splits).

    Our dev and test sets are fixed subsets of the official validation dialogues
    (:data:`CONVAI2_SPLIT_SIZES`, drawn with :data:`CONVAI2_SPLIT_SEED`), the same whichever
    source was read, so scores are comparable. ``train`` is the official training split when the
    source has one (the Hub: 17,878 dialogues), else the remaining validation dialogues (the local
    copy: 700). Persona *sentences* recur across PersonaChat dialogues, so a persona can appear
    in two splits; a dialogue cannot.
    """
    if "validation" not in dd:
        raise DataError(f"ConvAI2 needs its official validation split; got splits {list(dd)}")
    official = dd["validation"]
    n_dev, n_test = CONVAI2_SPLIT_SIZES["validation"], CONVAI2_SPLIT_SIZES["test"]
    if len(official) <= n_dev + n_test:
        raise DataError(f"ConvAI2 validation has {len(official)} dialogues; expected 1,000")
    order = np.random.default_rng(CONVAI2_SPLIT_SEED).permutation(len(official))
    test, dev, rest = np.split(order, [n_test, n_test + n_dev])
    train = dd["train"] if "train" in dd else official.select(sorted(rest.tolist()))
    return DatasetDict(
        {
            "train": train,
            "validation": official.select(sorted(dev.tolist())),
            "test": official.select(sorted(test.tolist())),
        }
    )
