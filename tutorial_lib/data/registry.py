"""The registry: one :class:`DatasetSpec` per dataset name, and the sha256 of every local file.

A spec says what a dataset looks like (its ``Features``), where it lives on the Hugging Face
Hub (:class:`HubSpec`, plus how to rename the Hub's columns and splits) and, when it is part of
the local copy, which files hold it and which parser of :mod:`.local` reads them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from datasets import ClassLabel, DatasetDict, Features

from .errors import DataError
from .local import (
    GlueFile,
    Parser,
    glue_parser,
    parse_conll2003,
    parse_convai2,
    parse_mnli,
    parse_squad,
    parse_sst5,
    parse_trec,
    parse_ud,
    parse_wikitext,
    senteval_parser,
    split_by_dialogue,
)
from .schema import (
    COLA_FEATURES,
    CONLL2003_FEATURES,
    CONVAI2_FEATURES,
    MNLI_FEATURES,
    MRPC_FEATURES,
    POLARITY,
    QNLI_FEATURES,
    QQP_FEATURES,
    RTE_FEATURES,
    SPLITS,
    SQUAD_FEATURES,
    SST2_FEATURES,
    SST5_NAMES,
    STSB_FEATURES,
    SUBJ_NAMES,
    TREC_FEATURES,
    UD_FEATURES,
    WNLI_FEATURES,
    single_label_features,
    text_features,
)

NAME_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "sst-5": "sst5"}

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
    "conll2003/iob2/train.txt.gz": (
        "b314e93441099a2608864e011c009e5a3c07f93b386f23bfe33dccb216390c1b"
    ),
    "conll2003/iob2/valid.txt.gz": (
        "c8356996f5cdbd03bf795d48c27cbf809fd12b5b1536efdd1f0db2aee6f5d36a"
    ),
    "conll2003/iob2/test.txt.gz": (
        "8112bcb5776cc299a2be068fe830bff52fe62e8ae1331d37b3bc25824d9e4699"
    ),
    "squad-v1.1/train-v1.1.first11articles.json": (
        "79f9d1ceabbd1277f021806051eda565426eafab3eb5d1f20f7af70ca44d65eb"
    ),
    "squad-v1.1/dev-v1.1.reconstructed.json": (
        "996b8da6ec56b4fb6ac8a9f55a8885caf141a90648c9bc7359e420d5d7ce2841"
    ),
    "convai2/valid_self_original.txt.gz": (
        "f0a6a7b53fca87916755d87798816b53780bb3d40669b0b8b7de7683f5ad064b"
    ),
}

# ------------------------------------------------------------------------------- specs


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
    parse_local: Parser | None = None
    stratify: str | None = None
    hub_renames: Mapping[str, str] = field(default_factory=dict)
    hub_split_renames: Mapping[str, str] = field(default_factory=dict)
    hub_keep_splits: tuple[str, ...] = SPLITS
    label_aliases: Mapping[str, str] = field(default_factory=dict)
    local_subsets: Mapping[str, str] = field(default_factory=dict)
    """Splits of the local copy that hold only part of the official split: split -> what part
    (:func:`tutorial_lib.data.source_of` says it; the Hub serves the whole split)."""
    # applied to whichever source was read (local or Hub), before a validation split is carved
    resplit: Callable[[DatasetDict], DatasetDict] | None = None


def glue_spec(
    name: str,
    folder: str,
    features: Features,
    files: Mapping[str, GlueFile],
    **kwargs: Any,
) -> DatasetSpec:
    """Registry entry for a GLUE task (hub ``nyu-mll/glue``, config = name)."""
    return DatasetSpec(
        name=name,
        features=features,
        hub=HubSpec("nyu-mll/glue", name),
        local_dir=f"glue/{folder}",
        local_files=tuple(f"glue/{folder}/{f.fname}" for f in files.values()),
        parse_local=glue_parser(folder, files, features),
        stratify="label" if isinstance(features["label"], ClassLabel) else None,
        **kwargs,
    )


def senteval_spec(
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
        features=single_label_features(names),
        hub=hub,
        local_dir=f"senteval/{folder}",
        local_files=tuple(f"senteval/{folder}/{f}" for f in files_by_label.values()),
        parse_local=senteval_parser(folder, files_by_label, names, encoding),
        stratify="label",
        **kwargs,
    )


# ----------------------------------------------------------------------------- the table

_S1S2 = {"sentence1": "sentence1", "sentence2": "sentence2"}
_MRPC_TEXT = {"sentence1": "#1 String", "sentence2": "#2 String"}
_COLA_HEADER = ("source", "label", "mark", "sentence")

REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="wikitext-2",
            features=text_features(),
            hub=HubSpec("Salesforce/wikitext", "wikitext-2-v1"),
            local_dir="wikitext-2",
            local_files=("wikitext-2/train.txt.gz", "wikitext-2/valid.txt", "wikitext-2/test.txt"),
            parse_local=parse_wikitext,
        ),
        DatasetSpec(
            name="wikitext-103",
            features=text_features(),
            hub=HubSpec("Salesforce/wikitext", "wikitext-103-v1"),
        ),
        DatasetSpec(
            name="trec",
            features=TREC_FEATURES,
            hub=HubSpec("CogComp/trec", revision="refs/convert/parquet"),
            local_dir="trec",
            local_files=("trec/train_5500.label", "trec/TREC_10.label"),
            parse_local=parse_trec,
            stratify="coarse_label",
        ),
        glue_spec(
            "sst2",
            "SST-2",
            SST2_FEATURES,
            {
                "train": GlueFile("train.tsv", {"sentence": "sentence"}, "label"),
                "validation": GlueFile("dev.tsv", {"sentence": "sentence"}, "label"),
                "test": GlueFile("test.tsv", {"sentence": "sentence"}, idx_col="index"),
            },
        ),
        glue_spec(
            "cola",
            "CoLA",
            COLA_FEATURES,
            {
                "train": GlueFile(
                    "train.tsv", {"sentence": "sentence"}, "label", header=_COLA_HEADER
                ),
                "validation": GlueFile(
                    "dev.tsv", {"sentence": "sentence"}, "label", header=_COLA_HEADER
                ),
                "test": GlueFile("test.tsv", {"sentence": "sentence"}, idx_col="index"),
            },
        ),
        glue_spec(
            "mrpc",
            "MRPC",
            MRPC_FEATURES,
            {
                "train": GlueFile("train.tsv", _MRPC_TEXT, "Quality", encoding="utf-8-sig"),
                "validation": GlueFile("dev.tsv", _MRPC_TEXT, "Quality", encoding="utf-8-sig"),
                "test": GlueFile("test.tsv", _MRPC_TEXT, idx_col="index", encoding="utf-8-sig"),
            },
        ),
        glue_spec(
            "rte",
            "RTE",
            RTE_FEATURES,
            {
                "train": GlueFile("train.tsv", _S1S2, "label", "index"),
                "validation": GlueFile("dev.tsv", _S1S2, "label", "index"),
                "test": GlueFile("test.tsv", _S1S2, idx_col="index"),
            },
        ),
        glue_spec(
            "wnli",
            "WNLI",
            WNLI_FEATURES,
            {
                "train": GlueFile("train.tsv", _S1S2, "label", "index"),
                "validation": GlueFile("dev.tsv", _S1S2, "label", "index"),
            },
        ),
        glue_spec(
            "stsb",
            "STS-B",
            STSB_FEATURES,
            {
                "train": GlueFile("train.tsv", _S1S2, "score", "index"),
                "validation": GlueFile("dev.tsv", _S1S2, "score", "index"),
                "test": GlueFile("test.tsv", _S1S2, idx_col="index"),
            },
        ),
        glue_spec(
            "qnli",
            "QNLI",
            QNLI_FEATURES,
            {
                "validation": GlueFile(
                    "dev.tsv", {"question": "question", "sentence": "sentence"}, "label", "index"
                ),
                "test": GlueFile(
                    "test.tsv", {"question": "question", "sentence": "sentence"}, idx_col="index"
                ),
            },
        ),
        glue_spec(
            "qqp",
            "QQP",
            QQP_FEATURES,
            {
                "train": GlueFile(
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
            parse_local=parse_mnli,
            stratify="label",
            hub_split_renames={"validation_matched": "validation"},
            hub_keep_splits=("validation",),
        ),
        senteval_spec(
            "mr",
            "MR",
            {"negative": "rt-polarity.neg", "positive": "rt-polarity.pos"},
            POLARITY,
            HubSpec("cornell-movie-review-data/rotten_tomatoes"),
            encoding="latin-1",
            label_aliases={"neg": "negative", "pos": "positive"},
        ),
        senteval_spec(
            "cr",
            "CR",
            {"negative": "custrev.neg", "positive": "custrev.pos"},
            POLARITY,
            HubSpec("SetFit/SentEval-CR"),
        ),
        senteval_spec(
            "mpqa",
            "MPQA",
            {"negative": "mpqa.neg", "positive": "mpqa.pos"},
            POLARITY,
            HubSpec("jxm/mpqa"),
            hub_renames={"sentence": "text"},
        ),
        senteval_spec(
            "subj",
            "SUBJ",
            {"objective": "subj.objective", "subjective": "subj.subjective"},
            SUBJ_NAMES,
            HubSpec("SetFit/subj"),
        ),
        DatasetSpec(
            name="sst5",
            features=single_label_features(SST5_NAMES),
            hub=HubSpec("SetFit/sst5"),
            local_dir="senteval/SST-5",
            local_files=tuple(f"senteval/SST-5/sentiment-{s}" for s in ("train", "dev", "test")),
            parse_local=parse_sst5,
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
            parse_local=parse_ud,
        ),
        DatasetSpec(
            name="conll2003",
            features=CONLL2003_FEATURES,
            # the repository holds conll2003.py, which datasets 5 refuses: read its parquet export
            hub=HubSpec("eriktks/conll2003", revision="refs/convert/parquet", data_dir="conll2003"),
            local_dir="conll2003",
            local_files=tuple(f"conll2003/iob2/{s}.txt.gz" for s in ("train", "valid", "test")),
            parse_local=parse_conll2003,
        ),
        DatasetSpec(
            name="squad",
            features=SQUAD_FEATURES,
            hub=HubSpec("rajpurkar/squad", "plain_text"),
            local_dir="squad-v1.1",
            local_files=(
                "squad-v1.1/train-v1.1.first11articles.json",
                "squad-v1.1/dev-v1.1.reconstructed.json",
            ),
            parse_local=parse_squad,
            hub_keep_splits=("train", "validation"),
            local_subsets={
                "train": "the first 11 of 442 articles: 3,807 of 87,599 questions",
            },
        ),
        DatasetSpec(
            name="convai2",
            features=CONVAI2_FEATURES,
            # TransferTransfo's personachat_self_original.json as parquet: train 17,878 and
            # validation 1,000 dialogues (dataset_infos.json at this commit)
            hub=HubSpec(
                "AlekseyKorshuk/persona-chat", revision="498fd0081de41b8833a72e1a126aaf52917e1ddd"
            ),
            local_dir="convai2",
            local_files=("convai2/valid_self_original.txt.gz",),
            parse_local=parse_convai2,
            resplit=split_by_dialogue,
        ),
    )
}


def list_datasets() -> list[str]:
    """The registry names accepted by :func:`tutorial_lib.data.load`, sorted."""
    return sorted(REGISTRY)


def lookup(name: str) -> DatasetSpec:
    """Registry entry for ``name`` (case-insensitive, a few aliases); DataError if unknown."""
    key = str(name).strip().lower()
    key = NAME_ALIASES.get(key, key)
    if key in REGISTRY:
        return REGISTRY[key]
    close = difflib.get_close_matches(key, list(REGISTRY) + list(NAME_ALIASES), n=1)
    hint = f" Did you mean {NAME_ALIASES.get(close[0], close[0])!r}?" if close else ""
    raise DataError(f"unknown dataset {name!r}.{hint} Valid names: {', '.join(list_datasets())}")
