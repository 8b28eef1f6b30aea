"""Dataset registry and loaders for the tutorial notebooks.

Every notebook gets its data through :func:`load`, which returns a
:class:`datasets.DatasetDict` with *stable* column names and label encodings, whatever the
source:

* the **local copy**, a directory laid out as described in its ``MANIFEST.md`` and named by
  the environment variable ``TUTORIAL_DATA_DIR`` (:data:`DATA_ENV_VAR`). Every file used is
  checked against the sha256 recorded in :data:`EXPECTED_SHA256` before it is parsed;
* the **Hugging Face Hub** (``datasets.load_dataset``), whose columns, label names and split
  names are normalised to the same schema as the local copy.

``source="auto"`` (the default) uses the local copy when ``TUTORIAL_DATA_DIR`` is set and the
dataset is part of it, and the Hub otherwise; ``"local"`` and ``"hub"`` force one of them.

The registry (:func:`list_datasets`), with the columns each dataset has:

==================  ==========================================================================
name                columns (label = ``datasets.ClassLabel`` unless said otherwise)
==================  ==========================================================================
``wikitext-2``      ``text`` (one row per line of the *tokenized* release, as the Hub config
                    ``wikitext-2-v1``: blank lines are ``""``, other lines keep their ``"\\n"``)
``wikitext-103``    same, Hub only (``wikitext-103-v1``; not part of the local copy)
``trec``            ``text``, ``coarse_label`` (6 CogComp names), ``fine_label`` (50 names)
``sst2``            ``sentence``, ``label`` [negative, positive], ``idx``
``cola``            ``sentence``, ``label`` [unacceptable, acceptable], ``idx``
``mrpc``            ``sentence1``, ``sentence2``, ``label`` [not_equivalent, equivalent], ``idx``
``rte``             ``sentence1``, ``sentence2``, ``label`` [entailment, not_entailment], ``idx``
``wnli``            ``sentence1``, ``sentence2``, ``label`` [not_entailment, entailment], ``idx``
``stsb``            ``sentence1``, ``sentence2``, ``label`` (float32 in [0, 5]), ``idx``
``qnli``            ``question``, ``sentence``, ``label`` [entailment, not_entailment], ``idx``
``qqp``             ``question1``, ``question2``, ``label`` [not_duplicate, duplicate], ``idx``
``mnli``            ``premise``, ``hypothesis``, ``label`` [entailment, neutral, contradiction],
                    ``idx``; only the ``validation`` (= matched dev) split, from both sources
``mr``/``cr``/      ``text``, ``label`` [negative, positive]
``mpqa``
``subj``            ``text``, ``label`` [objective, subjective]
``sst5``            ``text``, ``label`` [very negative, negative, neutral, positive,
                    very positive]
``ud-ewt``          ``sent_id``, ``text``, ``tokens``, ``upos`` (list of ClassLabel over the 17 UD
                    UPOS tags), ``xpos``, ``head`` (list of int), ``deprel``
==================  ==========================================================================

Split names are always among ``train``, ``validation`` and ``test``. GLUE test splits are
unlabeled (``label == -1``, as on the Hub). The local copy holds only part of some GLUE tasks
(QNLI: validation + test; QQP: a 20,000-row train subset; MNLI: matched dev only).

Validation splits. When a dataset has a ``train`` split but no ``validation`` split,
``validation_fraction`` of train is carved off as ``validation``, reproducibly for a given
``seed`` and stratified by the label when there is a ClassLabel label; a ``test`` split is
never touched. ``validation_fraction=0`` keeps train whole.

The SentEval sets ``mr``, ``cr``, ``mpqa`` and ``subj`` have no official split in the local
copy: they get a fixed, stratified 80/10/10 train/validation/test split made with the seed
:data:`SENTEVAL_SPLIT_SEED`, so their test split never changes (``validation_fraction`` and
``seed`` do not apply to them). Blank lines are dropped. This split differs from the fixed
split of the Hub's ``rotten_tomatoes`` (8,530/1,066/1,066), which ``mr`` uses when loaded from
the Hub, so scores from the two sources are not comparable.

Results are memoised in-process per ``(name, validation_fraction, seed, source)``, and file
verification per ``(path, size, mtime)``; :func:`clear_cache` forgets both.
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

__all__ = [
    "DATA_ENV_VAR",
    "EXPECTED_SHA256",
    "SENTEVAL_SPLIT_SEED",
    "DataError",
    "clear_cache",
    "data_dir",
    "list_datasets",
    "load",
    "source_of",
    "verify_file",
]

DATA_ENV_VAR = "TUTORIAL_DATA_DIR"
"""The one configurable location of the local copy of the data."""

SENTEVAL_SPLIT_SEED = 0
"""Seed of the fixed 80/10/10 split of MR, CR, MPQA and SUBJ (never change it)."""

_OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_SOURCES = ("auto", "local", "hub")
_SPLITS = ("train", "validation", "test")
_SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}
_NAME_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "sst-5": "sst5"}


class DataError(RuntimeError):
    """A data problem the user can fix; the message says what to do."""


# sha256 of every local file the loaders read, relative to the local copy (from MANIFEST.md).
EXPECTED_SHA256: dict[str, str] = {
    "wikitext-2/train.txt.gz": "0c202e0b5d919429261b7291d9b5998f0db680c0a6700c0ff2a886d0abe055d4",
    "wikitext-2/valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    "wikitext-2/test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
    "trec/train_5500.label": "8bd6e79493f43bbd22c364587366a1dced54e1e31259eaa92721a0f526031116",
    "trec/TREC_10.label": "86ad53c8fc9d397ab2f4be7c967d8efb470b260140557d3e57afad69d1b88b76",
    "senteval/MR/rt-polarity.pos": (
        "34e5b0da2d491e46b700b00afe735aaae0962bcfe4f7f22b2d8077e714fa370f"
    ),
    "senteval/MR/rt-polarity.neg": (
        "c4ac36eaa8adc8ee31c31f69594bfbe68d83ef5b6db53f1f19b28c0be52f3999"
    ),
    "senteval/CR/custrev.pos": "91a20a4ffeb5d38a39a4087bb247e16538aff21e7d621ae59738379f39f21732",
    "senteval/CR/custrev.neg": "ec94532766f6f962094841ab3bee2ad6f232f996c3756825a91e78bcc294750f",
    "senteval/MPQA/mpqa.pos": "7487dbb74c77383e60b292845495163a9e21fb70a4fdacdda933413e43163f0d",
    "senteval/MPQA/mpqa.neg": "8da6e035fa4cea02f0555091096b29a6b3995ff0adf41fad25008dcee066b79e",
    "senteval/SUBJ/subj.subjective": (
        "274c2ffe59c204dc4df779848561786f59a98cc20dda3cfdd7d9f76a4f730710"
    ),
    "senteval/SUBJ/subj.objective": (
        "d8ccd43f1674f1c17e4ab717564e3561cfb719b0db4cfb19e5677427c68ff8a1"
    ),
    "senteval/SST-5/sentiment-train": (
        "9b52b5f686ed438d4d0274c385369251b3d579b578fddd340ba8a9bae2ca4bee"
    ),
    "senteval/SST-5/sentiment-dev": (
        "b2f76c62b960f9fda5c6d751edb125abab4f878eb94a8754239b7f4af647f4c3"
    ),
    "senteval/SST-5/sentiment-test": (
        "0e2ebb450c231f7b3d67fc932066e7bb26ae7bad8c88488f45ed44ef02eb3c73"
    ),
    "ud-english-ewt/en_ewt-ud-train.conllu.gz": (
        "bd47e08c9e18ec12d319e84df2ccdb272ff6de1d0dba5761117d3caf8b358f7b"
    ),
    "ud-english-ewt/en_ewt-ud-dev.conllu": (
        "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"
    ),
    "ud-english-ewt/en_ewt-ud-test.conllu": (
        "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"
    ),
    "glue/SST-2/train.tsv": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
    "glue/SST-2/dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
    "glue/SST-2/test.tsv": "69a938605609b3e6663b4487918fe1565eb293734e6e520d0366d1d412fd2a13",
    "glue/CoLA/train.tsv": "cb368ebeb9f27d7ad03720d27ddc95687a311bdb100781a2fe59a5f5b1bc0624",
    "glue/CoLA/dev.tsv": "8c013e21dc39957cac37378d87bebe225b694a0d5fe13eded66c2856628833fd",
    "glue/CoLA/test.tsv": "3b4df85f7a9a0633574b38d181e18090ac961a24b18fb6bcd74999ddea8ad0b8",
    "glue/MRPC/train.tsv": "122becc469405bc16f9defcb8715d2a4b7ce600e9d9381e6dc42bfdd1494c51d",
    "glue/MRPC/dev.tsv": "81c8a1a9e1dfe461dd2c1a4f98f43fe18bece44d2bf9e3d0b245b88e5aa5eaf7",
    "glue/MRPC/test.tsv": "4ee428d354c01fa35c2f0f6ab835398abb0bec01f17ed68fbcb6c04265505b0a",
    "glue/RTE/train.tsv": "81d25e323e1ab5b2ad7cd445f1a69db89f2b1c104f3e26915a9421aa4a5f4735",
    "glue/RTE/dev.tsv": "80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb",
    "glue/RTE/test.tsv": "6e33f09b5c2bfd5fd5fde217070f3dd49e484e33b9752b5864cf36fc421a213f",
    "glue/WNLI/train.tsv": "9a88e9d54b6861cc796a088e9acf4f5f65064a9ef65ae6fa7a688b28391e5c9a",
    "glue/WNLI/dev.tsv": "cba00490596dd14be8cf53b4f53bb744abe3a7b89f81ab210528d80225338ed5",
    "glue/STS-B/train.tsv": "41c4d978b6162abdcada7e49a982211954cca5459c228db478af333124b257a2",
    "glue/STS-B/dev.tsv": "fe7dc0632a5033562f3cadff991f6e8d9b9b6311861660e78c3c82eb7db67f59",
    "glue/STS-B/test.tsv": "16b4223d7d44a644fbc10f1b449472cfe81e1715fb07cf44023b0aa88ce856eb",
    "glue/QNLI/dev.tsv": "763e95932dd3578251de71582e06829015f9c3815a518c751dc537219b159de4",
    "glue/QNLI/test.tsv": "6d856264e292fa7a7bc7b8e182efa1454ffd9532733c12ad813017dd5b377a5a",
    "glue/QQP/train.subset20k.tsv": (
        "b8a0265f35f88bc4603c8f9c8732308a4f9c087cf8278ae17e9317c734eb3b69"
    ),
    "glue/MNLI/dev_matched.jsonl": (
        "081af9b80f4fe75aba97d034c0ff21a8017c4d18e3b5b2b0b7612ab2cc3c7bf2"
    ),
}

# --------------------------------------------------------------------------- label names

TREC_COARSE = ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]
TREC_FINE = (
    [f"ABBR:{x}" for x in ("abb", "exp")]
    + [
        f"ENTY:{x}"
        for x in (
            *("animal", "body", "color", "cremat", "currency", "dismed", "event", "food"),
            *("instru", "lang", "letter", "other", "plant", "product", "religion", "sport"),
            *("substance", "symbol", "techmeth", "termeq", "veh", "word"),
        )
    ]
    + [f"DESC:{x}" for x in ("def", "desc", "manner", "reason")]
    + [f"HUM:{x}" for x in ("gr", "ind", "title", "desc")]
    + [f"LOC:{x}" for x in ("city", "country", "mount", "other", "state")]
    + [
        f"NUM:{x}"
        for x in (
            *("code", "count", "date", "dist", "money", "ord", "other", "period", "perc"),
            *("speed", "temp", "volsize", "weight"),
        )
    ]
)
UPOS = [
    *("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON"),
    *("PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"),
]
SST5_NAMES = ["very negative", "negative", "neutral", "positive", "very positive"]
POLARITY = ["negative", "positive"]

# ------------------------------------------------------------------------------ schemas


def _text_features() -> Features:
    return Features({"text": Value("string")})


def _glue_features(text_cols: Iterable[str], label: Any) -> Features:
    cols: dict[str, Any] = {c: Value("string") for c in text_cols}
    cols["label"] = label
    cols["idx"] = Value("int32")
    return Features(cols)


def _single_label_features(names: list[str]) -> Features:
    return Features({"text": Value("string"), "label": ClassLabel(names=names)})


TREC_FEATURES = Features(
    {
        "text": Value("string"),
        "coarse_label": ClassLabel(names=TREC_COARSE),
        "fine_label": ClassLabel(names=TREC_FINE),
    }
)
UD_FEATURES = Features(
    {
        "sent_id": Value("string"),
        "text": Value("string"),
        "tokens": List(Value("string")),
        "upos": List(ClassLabel(names=UPOS)),
        "xpos": List(Value("string")),
        "head": List(Value("int32")),
        "deprel": List(Value("string")),
    }
)

# ------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class HubSpec:
    """Where a dataset lives on the Hugging Face Hub and how to ask for it."""

    path: str
    config: str | None = None
    revision: str | None = None
    data_dir: str | None = None

    def details(self) -> str:
        """`` (config ..., revision ...)`` or ``""``."""
        extras = [
            f"{key} {value}"
            for key, value in (
                ("config", self.config),
                ("revision", self.revision),
                ("data_dir", self.data_dir),
            )
            if value
        ]
        return f" ({', '.join(extras)})" if extras else ""

    def describe(self) -> str:
        """Human-readable ``hub <id> (config ..., revision ...)``."""
        return f"hub {self.path}{self.details()}"


@dataclass(frozen=True)
class DatasetSpec:
    """One registry entry: schema, Hub location and (optionally) local files + parser."""

    name: str
    features: Features
    hub: HubSpec
    local_dir: str | None = None
    local_files: tuple[str, ...] = ()
    parse_local: Callable[[Path], DatasetDict] | None = None
    stratify: str | None = None
    hub_renames: Mapping[str, str] = field(default_factory=dict)
    hub_split_renames: Mapping[str, str] = field(default_factory=dict)
    hub_keep_splits: tuple[str, ...] = _SPLITS
    label_aliases: Mapping[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------ file helpers


def _read_lines(path: Path, encoding: str = "utf-8", keepends: bool = False) -> list[str]:
    """Lines of a (possibly gzipped) text file; splits on newlines only."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding=encoding, newline=None) as f:
        if keepends:
            return list(f)
        return [line.rstrip("\n") for line in f]


def _label_index(value: str, names: list[str], where: str) -> int:
    """Index of a label given by name or by integer string."""
    if value in names:
        return names.index(value)
    if value.lstrip("-").isdigit() and 0 <= int(value) < len(names):
        return int(value)
    raise DataError(f"unexpected label {value!r} in {where}; expected one of {names}")


def _from_columns(columns: dict[str, list[Any]], features: Features) -> Dataset:
    """Build an in-memory Dataset with the given schema (columns in schema order)."""
    return Dataset.from_dict({c: columns[c] for c in features}, features=features)


# ------------------------------------------------------------------------ local parsers


def _parse_wikitext(root: Path) -> DatasetDict:
    """WikiText-2 tokenized: one row per line; blank lines -> "" (like the Hub config)."""
    files = {"train": "train.txt.gz", "validation": "valid.txt", "test": "test.txt"}
    out = {}
    for split, fname in files.items():
        lines = _read_lines(root / "wikitext-2" / fname, keepends=True)
        rows = [line if line.strip() else "" for line in lines]
        out[split] = _from_columns({"text": rows}, _text_features())
    return DatasetDict(out)


def _parse_trec_file(path: Path) -> dict[str, list[Any]]:
    """``COARSE:fine question ...`` lines (latin-1) -> text / coarse / fine label ints."""
    cols: dict[str, list[Any]] = {"text": [], "coarse_label": [], "fine_label": []}
    for n, line in enumerate(_read_lines(path, encoding="latin-1"), start=1):
        # One stray byte (0xF0 in "sister\xf0city") is a broken separator: make it a space.
        label, _, text = line.replace("\xf0", " ").strip().partition(" ")
        if not label:
            continue
        where = f"{path}:{n}"
        cols["text"].append(text)
        cols["coarse_label"].append(_label_index(label.split(":")[0], TREC_COARSE, where))
        cols["fine_label"].append(_label_index(label, TREC_FINE, where))
    return cols


def _parse_trec(root: Path) -> DatasetDict:
    """TREC train_5500 / TREC_10, labels mapped by name to the CogComp order."""
    files = {"train": "train_5500.label", "test": "TREC_10.label"}
    return DatasetDict(
        {
            s: _from_columns(_parse_trec_file(root / "trec" / f), TREC_FEATURES)
            for s, f in files.items()
        }
    )


def _read_tsv(
    path: Path, encoding: str = "utf-8", header: list[str] | None = None
) -> list[dict[str, str]]:
    """Rows of a GLUE TSV as dicts; split on tabs only (quotes are ordinary characters).

    ``header=None`` takes the column names from the first line. QQP has one row whose last
    tab is a space (``... jlpt5? 0``): such a row is repaired by splitting the trailing label
    off; other rows with the wrong number of fields raise :class:`DataError`.
    """
    lines = [line for line in _read_lines(path, encoding=encoding) if line]
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
class _GlueFile:
    """How one GLUE file maps to the HF columns."""

    fname: str
    text_cols: Mapping[str, str]  # HF column -> column in the file
    label_col: str | None = None
    idx_col: str | None = None
    header: tuple[str, ...] | None = None
    encoding: str = "utf-8"


def _glue_split(path: Path, spec: _GlueFile, features: Features) -> Dataset:
    """Read one GLUE TSV into the HF schema (test files get label -1)."""
    header = list(spec.header) if spec.header else None
    rows = _read_tsv(path, encoding=spec.encoding, header=header)
    label_feature = features["label"]
    cols: dict[str, list[Any]] = {c: [r[src] for r in rows] for c, src in spec.text_cols.items()}
    if spec.label_col is None:
        cols["label"] = [-1.0 if label_feature.dtype == "float32" else -1] * len(rows)
    elif isinstance(label_feature, ClassLabel):
        cols["label"] = [
            _label_index(r[spec.label_col], label_feature.names, f"{path}:{n}")
            for n, r in enumerate(rows, start=2)
        ]
    else:
        cols["label"] = [float(r[spec.label_col]) for r in rows]
    cols["idx"] = [int(r[spec.idx_col]) for r in rows] if spec.idx_col else list(range(len(rows)))
    return _from_columns(cols, features)


def _glue_parser(
    folder: str, files: Mapping[str, _GlueFile], features: Features
) -> Callable[[Path], DatasetDict]:
    """A local parser for one GLUE task folder."""

    def parse(root: Path) -> DatasetDict:
        return DatasetDict(
            {
                s: _glue_split(root / "glue" / folder / f.fname, f, features)
                for s, f in files.items()
            }
        )

    return parse


def _parse_mnli(root: Path) -> DatasetDict:
    """MNLI matched dev (JSONL premise/hypothesis/label names) -> ``validation``."""
    path = root / "glue" / "MNLI" / "dev_matched.jsonl"
    names = MNLI_FEATURES["label"].names
    cols: dict[str, list[Any]] = {"premise": [], "hypothesis": [], "label": [], "idx": []}
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        cols["premise"].append(row["premise"])
        cols["hypothesis"].append(row["hypothesis"])
        cols["label"].append(_label_index(row["label"], names, f"{path}:{n}"))
        cols["idx"].append(len(cols["idx"]))
    return DatasetDict({"validation": _from_columns(cols, MNLI_FEATURES)})


def _senteval_split(ds: Dataset) -> DatasetDict:
    """Fixed stratified 80/10/10 train/validation/test split (seed SENTEVAL_SPLIT_SEED)."""
    first = ds.train_test_split(test_size=0.2, seed=SENTEVAL_SPLIT_SEED, stratify_by_column="label")
    second = first["test"].train_test_split(
        test_size=0.5, seed=SENTEVAL_SPLIT_SEED, stratify_by_column="label"
    )
    return DatasetDict(
        {"train": first["train"], "validation": second["train"], "test": second["test"]}
    )


def _senteval_parser(
    folder: str, files_by_label: Mapping[str, str], names: list[str], encoding: str = "utf-8"
) -> Callable[[Path], DatasetDict]:
    """A local parser for one SentEval binary set (one file per label, one sentence a line)."""

    def parse(root: Path) -> DatasetDict:
        cols: dict[str, list[Any]] = {"text": [], "label": []}
        for label_name, fname in files_by_label.items():
            lines = _read_lines(root / "senteval" / folder / fname, encoding=encoding)
            texts = [line.strip() for line in lines if line.strip()]
            cols["text"] += texts
            cols["label"] += [names.index(label_name)] * len(texts)
        return _senteval_split(_from_columns(cols, _single_label_features(names)))

    return parse


def _parse_sst5(root: Path) -> DatasetDict:
    """SST-5 ``<label> <sentence>`` files -> train/validation/test."""
    files = {"train": "sentiment-train", "validation": "sentiment-dev", "test": "sentiment-test"}
    out = {}
    for split, fname in files.items():
        path = root / "senteval" / "SST-5" / fname
        cols: dict[str, list[Any]] = {"text": [], "label": []}
        for n, line in enumerate(_read_lines(path), start=1):
            if not line.strip():
                continue
            label, _, text = line.partition(" ")
            cols["label"].append(_label_index(label, SST5_NAMES, f"{path}:{n}"))
            cols["text"].append(text.strip())
        out[split] = _from_columns(cols, _single_label_features(SST5_NAMES))
    return DatasetDict(out)


def _parse_conllu(path: Path) -> dict[str, list[Any]]:
    """CoNLL-U -> one row per sentence; multiword ranges (1-2) and empty nodes (8.1) skipped."""
    cols: dict[str, list[Any]] = {c: [] for c in UD_FEATURES}
    upos_index = {tag: i for i, tag in enumerate(UPOS)}
    meta: dict[str, str] = {}
    words: list[list[str]] = []

    def flush() -> None:
        if words:
            cols["sent_id"].append(meta.get("sent_id", ""))
            cols["text"].append(meta.get("text", ""))
            cols["tokens"].append([w[1] for w in words])
            cols["upos"].append([upos_index[w[3]] for w in words])
            cols["xpos"].append([w[4] for w in words])
            cols["head"].append([int(w[6]) for w in words])
            cols["deprel"].append([w[7] for w in words])
        meta.clear()
        words.clear()

    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            flush()
        elif line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                meta[key.strip()] = value.strip()
        else:
            fields = line.split("\t")
            if len(fields) != 10 or (fields[0].isdigit() and fields[3] not in upos_index):
                raise DataError(f"{path}:{n}: not a valid CoNLL-U word line")
            if fields[0].isdigit():
                words.append(fields)
    flush()
    return cols


def _parse_ud(root: Path) -> DatasetDict:
    """UD English-EWT train/dev/test CoNLL-U files."""
    files = {
        "train": "en_ewt-ud-train.conllu.gz",
        "validation": "en_ewt-ud-dev.conllu",
        "test": "en_ewt-ud-test.conllu",
    }
    return DatasetDict(
        {
            s: _from_columns(_parse_conllu(root / "ud-english-ewt" / f), UD_FEATURES)
            for s, f in files.items()
        }
    )


# ------------------------------------------------------------------------- the registry

SST2_FEATURES = _glue_features(["sentence"], ClassLabel(names=POLARITY))
COLA_FEATURES = _glue_features(["sentence"], ClassLabel(names=["unacceptable", "acceptable"]))
MRPC_FEATURES = _glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["not_equivalent", "equivalent"])
)
RTE_FEATURES = _glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["entailment", "not_entailment"])
)
WNLI_FEATURES = _glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["not_entailment", "entailment"])
)
STSB_FEATURES = _glue_features(["sentence1", "sentence2"], Value("float32"))
QNLI_FEATURES = _glue_features(
    ["question", "sentence"], ClassLabel(names=["entailment", "not_entailment"])
)
QQP_FEATURES = _glue_features(
    ["question1", "question2"], ClassLabel(names=["not_duplicate", "duplicate"])
)
MNLI_FEATURES = _glue_features(
    ["premise", "hypothesis"], ClassLabel(names=["entailment", "neutral", "contradiction"])
)

_S1S2 = {"sentence1": "sentence1", "sentence2": "sentence2"}
_MRPC_TEXT = {"sentence1": "#1 String", "sentence2": "#2 String"}
_COLA_HEADER = ("source", "label", "mark", "sentence")


def _glue_spec(
    name: str,
    folder: str,
    features: Features,
    files: Mapping[str, _GlueFile],
    **kwargs: Any,
) -> DatasetSpec:
    """Registry entry for a GLUE task (hub ``nyu-mll/glue``, config = name)."""
    return DatasetSpec(
        name=name,
        features=features,
        hub=HubSpec("nyu-mll/glue", name),
        local_dir=f"glue/{folder}",
        local_files=tuple(f"glue/{folder}/{f.fname}" for f in files.values()),
        parse_local=_glue_parser(folder, files, features),
        stratify="label" if isinstance(features["label"], ClassLabel) else None,
        **kwargs,
    )


def _senteval_spec(
    name: str,
    folder: str,
    files_by_label: Mapping[str, str],
    names: list[str],
    hub: HubSpec,
    encoding: str = "utf-8",
    **kwargs: Any,
) -> DatasetSpec:
    """Registry entry for MR / CR / MPQA / SUBJ."""
    return DatasetSpec(
        name=name,
        features=_single_label_features(names),
        hub=hub,
        local_dir=f"senteval/{folder}",
        local_files=tuple(f"senteval/{folder}/{f}" for f in files_by_label.values()),
        parse_local=_senteval_parser(folder, files_by_label, names, encoding),
        stratify="label",
        **kwargs,
    )


_REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="wikitext-2",
            features=_text_features(),
            hub=HubSpec("Salesforce/wikitext", "wikitext-2-v1"),
            local_dir="wikitext-2",
            local_files=("wikitext-2/train.txt.gz", "wikitext-2/valid.txt", "wikitext-2/test.txt"),
            parse_local=_parse_wikitext,
        ),
        DatasetSpec(
            name="wikitext-103",
            features=_text_features(),
            hub=HubSpec("Salesforce/wikitext", "wikitext-103-v1"),
        ),
        DatasetSpec(
            name="trec",
            features=TREC_FEATURES,
            hub=HubSpec("CogComp/trec", revision="refs/convert/parquet"),
            local_dir="trec",
            local_files=("trec/train_5500.label", "trec/TREC_10.label"),
            parse_local=_parse_trec,
            stratify="coarse_label",
        ),
        _glue_spec(
            "sst2",
            "SST-2",
            SST2_FEATURES,
            {
                "train": _GlueFile("train.tsv", {"sentence": "sentence"}, "label"),
                "validation": _GlueFile("dev.tsv", {"sentence": "sentence"}, "label"),
                "test": _GlueFile("test.tsv", {"sentence": "sentence"}, idx_col="index"),
            },
        ),
        _glue_spec(
            "cola",
            "CoLA",
            COLA_FEATURES,
            {
                "train": _GlueFile(
                    "train.tsv", {"sentence": "sentence"}, "label", header=_COLA_HEADER
                ),
                "validation": _GlueFile(
                    "dev.tsv", {"sentence": "sentence"}, "label", header=_COLA_HEADER
                ),
                "test": _GlueFile("test.tsv", {"sentence": "sentence"}, idx_col="index"),
            },
        ),
        _glue_spec(
            "mrpc",
            "MRPC",
            MRPC_FEATURES,
            {
                "train": _GlueFile("train.tsv", _MRPC_TEXT, "Quality", encoding="utf-8-sig"),
                "validation": _GlueFile("dev.tsv", _MRPC_TEXT, "Quality", encoding="utf-8-sig"),
                "test": _GlueFile("test.tsv", _MRPC_TEXT, idx_col="index", encoding="utf-8-sig"),
            },
        ),
        _glue_spec(
            "rte",
            "RTE",
            RTE_FEATURES,
            {
                "train": _GlueFile("train.tsv", _S1S2, "label", "index"),
                "validation": _GlueFile("dev.tsv", _S1S2, "label", "index"),
                "test": _GlueFile("test.tsv", _S1S2, idx_col="index"),
            },
        ),
        _glue_spec(
            "wnli",
            "WNLI",
            WNLI_FEATURES,
            {
                "train": _GlueFile("train.tsv", _S1S2, "label", "index"),
                "validation": _GlueFile("dev.tsv", _S1S2, "label", "index"),
            },
        ),
        _glue_spec(
            "stsb",
            "STS-B",
            STSB_FEATURES,
            {
                "train": _GlueFile("train.tsv", _S1S2, "score", "index"),
                "validation": _GlueFile("dev.tsv", _S1S2, "score", "index"),
                "test": _GlueFile("test.tsv", _S1S2, idx_col="index"),
            },
        ),
        _glue_spec(
            "qnli",
            "QNLI",
            QNLI_FEATURES,
            {
                "validation": _GlueFile(
                    "dev.tsv", {"question": "question", "sentence": "sentence"}, "label", "index"
                ),
                "test": _GlueFile(
                    "test.tsv", {"question": "question", "sentence": "sentence"}, idx_col="index"
                ),
            },
        ),
        _glue_spec(
            "qqp",
            "QQP",
            QQP_FEATURES,
            {
                "train": _GlueFile(
                    "train.subset20k.tsv",
                    {"question1": "question1", "question2": "question2"},
                    "is_duplicate",
                    "id",
                ),
            },
        ),
        DatasetSpec(
            name="mnli",
            features=MNLI_FEATURES,
            hub=HubSpec("nyu-mll/glue", "mnli"),
            local_dir="glue/MNLI",
            local_files=("glue/MNLI/dev_matched.jsonl",),
            parse_local=_parse_mnli,
            stratify="label",
            hub_split_renames={"validation_matched": "validation"},
            hub_keep_splits=("validation",),
        ),
        _senteval_spec(
            "mr",
            "MR",
            {"negative": "rt-polarity.neg", "positive": "rt-polarity.pos"},
            POLARITY,
            HubSpec("cornell-movie-review-data/rotten_tomatoes"),
            encoding="latin-1",
            label_aliases={"neg": "negative", "pos": "positive"},
        ),
        _senteval_spec(
            "cr",
            "CR",
            {"negative": "custrev.neg", "positive": "custrev.pos"},
            POLARITY,
            HubSpec("SetFit/SentEval-CR"),
        ),
        _senteval_spec(
            "mpqa",
            "MPQA",
            {"negative": "mpqa.neg", "positive": "mpqa.pos"},
            POLARITY,
            HubSpec("jxm/mpqa"),
            hub_renames={"sentence": "text"},
        ),
        _senteval_spec(
            "subj",
            "SUBJ",
            {"objective": "subj.objective", "subjective": "subj.subjective"},
            ["objective", "subjective"],
            HubSpec("SetFit/subj"),
        ),
        DatasetSpec(
            name="sst5",
            features=_single_label_features(SST5_NAMES),
            hub=HubSpec("SetFit/sst5"),
            local_dir="senteval/SST-5",
            local_files=tuple(f"senteval/SST-5/sentiment-{s}" for s in ("train", "dev", "test")),
            parse_local=_parse_sst5,
            stratify="label",
        ),
        DatasetSpec(
            name="ud-ewt",
            features=UD_FEATURES,
            hub=HubSpec("commul/universal_dependencies", "en_ewt", revision="2.17"),
            local_dir="ud-english-ewt",
            local_files=(
                "ud-english-ewt/en_ewt-ud-train.conllu.gz",
                "ud-english-ewt/en_ewt-ud-dev.conllu",
                "ud-english-ewt/en_ewt-ud-test.conllu",
            ),
            parse_local=_parse_ud,
        ),
    )
}

# --------------------------------------------------------------------------- caches

_VERIFIED: dict[tuple[str, int, int], str] = {}
_MEMO: dict[tuple[Any, ...], DatasetDict] = {}


def clear_cache() -> None:
    """Forget memoised datasets and file-verification results."""
    _VERIFIED.clear()
    _MEMO.clear()


# ------------------------------------------------------------------------- public API


def data_dir() -> Path | None:
    """The local copy named by ``TUTORIAL_DATA_DIR`` (``~`` expanded), or None if unset."""
    value = os.environ.get(DATA_ENV_VAR, "").strip()
    return Path(value).expanduser() if value else None


def list_datasets() -> list[str]:
    """The registry names accepted by :func:`load`, sorted."""
    return sorted(_REGISTRY)


def _spec(name: str) -> DatasetSpec:
    """Registry entry for ``name`` (case-insensitive, a few aliases); DataError if unknown."""
    key = str(name).strip().lower()
    key = _NAME_ALIASES.get(key, key)
    if key in _REGISTRY:
        return _REGISTRY[key]
    close = difflib.get_close_matches(key, list(_REGISTRY) + list(_NAME_ALIASES), n=1)
    hint = f" Did you mean {_NAME_ALIASES.get(close[0], close[0])!r}?" if close else ""
    raise DataError(f"unknown dataset {name!r}.{hint} Valid names: {', '.join(list_datasets())}")


def _resolve_source(spec: DatasetSpec, source: str) -> str:
    """``"local"`` or ``"hub"`` for a requested ``source``."""
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    if source == "hub":
        return "hub"
    if source == "local":
        if spec.parse_local is None:
            raise DataError(
                f"{spec.name} is not part of the local copy (see MANIFEST.md); "
                f"load it with source='hub' ({spec.hub.describe()})"
            )
        if data_dir() is None:
            raise DataError(
                f"source='local' needs the environment variable {DATA_ENV_VAR} set to the "
                "directory of the local copy of the data (see README)"
            )
        return "local"
    return "local" if data_dir() is not None and spec.parse_local is not None else "hub"


def source_of(name: str, *, source: str = "auto") -> str:
    """Where :func:`load` would read ``name`` from, e.g. ``"local copy <dir>/trec"``."""
    spec = _spec(name)
    if _resolve_source(spec, source) == "local":
        return f"local copy {data_dir() / spec.local_dir}"
    return spec.hub.describe()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(path: Path, sha256: str) -> Path:
    """Check ``path`` against its expected sha256 and return it.

    Results are cached per (path, size, mtime), so re-verifying an unchanged file is free.
    Raises :class:`DataError` when the file is missing or its hash differs.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise DataError(
            f"missing file {path}: it should be part of the local copy named by "
            f"{DATA_ENV_VAR} (see MANIFEST.md there). Re-copy it, point {DATA_ENV_VAR} at a "
            f"complete copy, or unset {DATA_ENV_VAR} to use the Hub"
        ) from err
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    actual = _VERIFIED.get(key)
    if actual is None:
        actual = _sha256(path)
        _VERIFIED[key] = actual
    if actual != sha256.lower():
        raise DataError(
            f"sha256 mismatch for {path}: expected {sha256}, got {actual}. The file is corrupt "
            "or a different version: re-copy it from the dataset's source listed in "
            f"MANIFEST.md, or unset {DATA_ENV_VAR} to use the Hub"
        )
    return path


def _verify_local(spec: DatasetSpec, root: Path) -> None:
    """Verify every local file of ``spec`` (DataError if the directory itself is missing)."""
    if not root.is_dir():
        raise DataError(
            f"{DATA_ENV_VAR}={root} is not a directory: point it at the local copy of the "
            f"data (the folder holding MANIFEST.md), or unset {DATA_ENV_VAR} to use the Hub"
        )
    for rel in spec.local_files:
        verify_file(root / rel, EXPECTED_SHA256[rel])


# --------------------------------------------------------------------------- Hub path


def _is_offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}
        for var in _OFFLINE_ENV_VARS
    )


def _offline_message(spec: DatasetSpec, detail: str) -> str:
    return (
        f"{detail}: set {DATA_ENV_VAR} to a local copy of the data (see README), "
        f"or go online to load {spec.hub.path}{spec.hub.details()}"
    )


def _network_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'the Hub could not be reached' (OSError covers most)."""
    errors: list[type[BaseException]] = [OSError, ConnectionError, TimeoutError]
    for module, attr in (
        ("httpx", "HTTPError"),
        ("httpx2", "HTTPError"),
        ("requests", "RequestException"),
    ):
        try:
            errors.append(getattr(__import__(module), attr))
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def _load_hub(spec: DatasetSpec) -> DatasetDict:
    """``datasets.load_dataset`` for ``spec``; network failures become DataError."""
    if _is_offline():
        raise DataError(_offline_message(spec, "offline and no local copy"))
    kwargs: dict[str, Any] = {}
    if spec.hub.revision:
        kwargs["revision"] = spec.hub.revision
    if spec.hub.data_dir:
        kwargs["data_dir"] = spec.hub.data_dir
    try:
        raw = datasets.load_dataset(spec.hub.path, spec.hub.config, **kwargs)
    except _network_errors() as err:
        raise DataError(
            _offline_message(spec, f"could not load {spec.hub.path} from the Hub ({err})")
        ) from err
    if not isinstance(raw, DatasetDict):
        raise DataError(f"{spec.hub.describe()} did not return a DatasetDict")
    return _normalise_hub(raw, spec)


def _name_table(target: ClassLabel, aliases: Mapping[str, str]) -> Callable[[str], int]:
    """Map a label name (aliases, case-insensitive) to the target index; -1 for None."""
    exact = {n: i for i, n in enumerate(target.names)}
    folded = {n.lower(): i for i, n in enumerate(target.names)}

    def lookup(name: str | None) -> int:
        if name is None:
            return -1
        name = aliases.get(name, name)
        if name in exact:
            return exact[name]
        if str(name).lower() in folded:
            return folded[str(name).lower()]
        raise DataError(f"unexpected label {name!r} from the Hub; expected one of {target.names}")

    return lookup


def _index_table(names: list[str], lookup: Callable[[str], int]) -> Callable[[int | None], int]:
    """Map source ClassLabel ints to target ints; a source name with no target (e.g. the
    ``_`` UPOS of multiword-token rows) raises only if a value actually uses it."""
    table: list[int | str] = []
    for name in names:
        try:
            table.append(lookup(name))
        except DataError:
            table.append(name)

    def convert(value: int | None) -> int:
        if value is None or value < 0:
            return -1
        mapped = table[value]
        return mapped if isinstance(mapped, int) else lookup(mapped)  # raises DataError

    return convert


def _label_converter(
    col: str, ds: Dataset, target: ClassLabel, aliases: Mapping[str, str]
) -> Callable[[dict[str, list[Any]]], list[Any]]:
    """Converter of a top-level label column to the target ClassLabel, by name."""
    src = ds.features[col]
    lookup = _name_table(target, aliases)
    if isinstance(src, ClassLabel):
        convert = _index_table(src.names, lookup)
        return lambda b: [convert(v) for v in b[col]]
    if isinstance(src, Value) and src.dtype == "string":
        return lambda b: [lookup(v) for v in b[col]]
    text_col = f"{col}_text"  # SetFit style: int label + label_text; prefer the names
    if text_col in ds.column_names:
        try:
            [lookup(v) for v in ds.unique(text_col)]
        except DataError:
            pass
        else:
            return lambda b: [lookup(v) for v in b[text_col]]

    def by_int(batch: dict[str, list[Any]]) -> list[int]:
        values = [-1 if v is None else int(v) for v in batch[col]]
        if any(v >= target.num_classes for v in values):
            raise DataError(f"label out of range for {target.names} from the Hub")
        return values

    return by_int


def _sequence_converter(
    col: str, ds: Dataset, target: Any, aliases: Mapping[str, str]
) -> Callable[[dict[str, list[Any]]], list[Any]]:
    """Converter of a list column (UPOS names, string heads, None xpos ...)."""
    inner = target.feature
    src_inner = getattr(ds.features[col], "feature", None)
    if isinstance(inner, ClassLabel):
        lookup = _name_table(inner, aliases)
        if isinstance(src_inner, ClassLabel):
            convert = _index_table(src_inner.names, lookup)
            return lambda b: [[convert(v) for v in row] for row in b[col]]
        return lambda b: [[lookup(v) for v in row] for row in b[col]]
    if isinstance(inner, Value) and inner.dtype.startswith("int"):
        return lambda b: [[int(v) for v in row] for row in b[col]]
    return lambda b: [["_" if v is None else v for v in row] for row in b[col]]


def _normalise_columns(ds: Dataset, spec: DatasetSpec) -> Dataset:
    """Bring one Hub split to the registry schema (names, label mapping, column order)."""
    renames = {k: v for k, v in spec.hub_renames.items() if k in ds.column_names}
    if renames:
        ds = ds.rename_columns(renames)
    missing = [c for c in spec.features if c not in ds.column_names]
    if missing:
        raise DataError(
            f"{spec.hub.describe()} has no column(s) {missing} (columns: {ds.column_names}); "
            f"the Hub dataset changed: set {DATA_ENV_VAR} to use the local copy"
        )
    if all(ds.features[c] == f for c, f in spec.features.items()):
        return ds.select_columns(list(spec.features))
    converters: dict[str, Callable[[dict[str, list[Any]]], list[Any]]] = {}
    for col, target in spec.features.items():
        if isinstance(target, ClassLabel):
            converters[col] = _label_converter(col, ds, target, spec.label_aliases)
        elif isinstance(target, List):
            converters[col] = _sequence_converter(col, ds, target, spec.label_aliases)
        else:
            converters[col] = lambda b, c=col: b[c]
    return ds.map(
        lambda batch: {col: conv(batch) for col, conv in converters.items()},
        batched=True,
        features=spec.features,
        remove_columns=ds.column_names,
    )


def _normalise_hub(raw: DatasetDict, spec: DatasetSpec) -> DatasetDict:
    """Rename/drop Hub splits and normalise their columns to the registry schema."""
    out: dict[str, Dataset] = {}
    for split, ds in raw.items():
        target = spec.hub_split_renames.get(split, _SPLIT_ALIASES.get(split, split))
        if target in spec.hub_keep_splits:
            out[target] = _normalise_columns(ds, spec)
    if not out:
        raise DataError(f"{spec.hub.describe()} has none of the splits {spec.hub_keep_splits}")
    return DatasetDict({s: out[s] for s in _SPLITS if s in out})


# ----------------------------------------------------------------------------- load


def _carve_validation(
    dd: DatasetDict, spec: DatasetSpec, validation_fraction: float, seed: int
) -> DatasetDict:
    """Add ``validation`` = a seeded (stratified) fraction of train, if there is none.

    Stratification falls back to a plain seeded split when a class is too small for it.
    """
    if "train" not in dd or "validation" in dd or validation_fraction == 0:
        return dd
    try:
        parts = dd["train"].train_test_split(
            test_size=validation_fraction, seed=seed, stratify_by_column=spec.stratify
        )
    except ValueError:  # too few rows per class to stratify (tiny datasets only)
        parts = dd["train"].train_test_split(test_size=validation_fraction, seed=seed)
    out = {"train": parts["train"], "validation": parts["test"]}
    if "test" in dd:
        out["test"] = dd["test"]
    return DatasetDict(out)


def load(
    name: str,
    *,
    validation_fraction: float = 0.1,
    seed: int = 0,
    source: str = "auto",
) -> DatasetDict:
    """Load registry dataset ``name`` with the stable schema described in the module docstring.

    Args:
        name: a name from :func:`list_datasets` (case-insensitive).
        validation_fraction: fraction of ``train`` carved off as ``validation`` when the
            dataset has no validation split (0 keeps train whole).
        seed: seed of that carving.
        source: ``"auto"``, ``"local"`` (needs ``TUTORIAL_DATA_DIR``) or ``"hub"``.

    Raises:
        DataError: unknown name, missing/corrupt local file, offline without a local copy,
            or the Hub unreachable.
    """
    spec = _spec(name)
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    resolved = _resolve_source(spec, source)
    if resolved == "local":
        root = data_dir()
        assert root is not None  # guaranteed by _resolve_source
        _verify_local(spec, root)  # cheap when cached; also guards the memo below
        key: tuple[Any, ...] = (spec.name, validation_fraction, seed, "local", str(root))
    else:
        key = (spec.name, validation_fraction, seed, "hub")
    if key not in _MEMO:
        if resolved == "local":
            assert spec.parse_local is not None
            raw = spec.parse_local(root)
        else:
            raw = _load_hub(spec)
        _MEMO[key] = _carve_validation(raw, spec, validation_fraction, seed)
    return DatasetDict(dict(_MEMO[key]))
