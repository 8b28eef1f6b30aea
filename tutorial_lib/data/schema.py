"""The stable schema every loader returns: split names, label names, ``datasets.Features``.

Label lists are in the order of the Hugging Face Hub's ClassLabels (the GLUE ones, CogComp
TREC), so a label int means the same thing whichever source a dataset came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from datasets import ClassLabel, Features, List, Value

SPLITS = ("train", "validation", "test")
"""The only split names :func:`tutorial_lib.data.load` returns, in this order."""

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
SUBJ_NAMES = ["objective", "subjective"]
# CoNLL-2003 in IOB2, in the order of the Hugging Face ``conll2003`` ClassLabels.
CONLL_NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
CONLL_POS = [
    *('"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN"),
    *("JJ", "JJR", "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS", "PRP"),
    *("PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"),
    *("WDT", "WP", "WP$", "WRB"),
]
CONLL_CHUNK = ["O"] + [
    f"{prefix}-{phrase}"
    for phrase in ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP")
    for prefix in ("B", "I")
]

# ------------------------------------------------------------------------------ builders


def text_features() -> Features:
    """A single ``text`` column (WikiText)."""
    return Features({"text": Value("string")})


def glue_features(text_cols: Iterable[str], label: Any) -> Features:
    """GLUE layout: the text columns, then ``label``, then ``idx`` (int32), as on the Hub."""
    cols: dict[str, Any] = {c: Value("string") for c in text_cols}
    cols["label"] = label
    cols["idx"] = Value("int32")
    return Features(cols)


def single_label_features(names: list[str]) -> Features:
    """``text`` + a ClassLabel ``label`` over ``names`` (SentEval sets, SST-5)."""
    return Features({"text": Value("string"), "label": ClassLabel(names=names)})


# ------------------------------------------------------------------------------ schemas

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
CONLL2003_FEATURES = Features(
    {
        "id": Value("string"),
        "tokens": List(Value("string")),
        "pos_tags": List(ClassLabel(names=CONLL_POS)),
        "chunk_tags": List(ClassLabel(names=CONLL_CHUNK)),
        "ner_tags": List(ClassLabel(names=CONLL_NER)),
    }
)
SQUAD_FEATURES = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "context": Value("string"),
        "question": Value("string"),
        "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
    }
)
"""SQuAD v1.1 as the Hub's ``rajpurkar/squad`` serves it: one row per question; ``answers`` holds
the reference answers (1 in train, about 3 in dev) as texts and character offsets."""
SST2_FEATURES = glue_features(["sentence"], ClassLabel(names=POLARITY))
COLA_FEATURES = glue_features(["sentence"], ClassLabel(names=["unacceptable", "acceptable"]))
MRPC_FEATURES = glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["not_equivalent", "equivalent"])
)
RTE_FEATURES = glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["entailment", "not_entailment"])
)
WNLI_FEATURES = glue_features(
    ["sentence1", "sentence2"], ClassLabel(names=["not_entailment", "entailment"])
)
STSB_FEATURES = glue_features(["sentence1", "sentence2"], Value("float32"))
QNLI_FEATURES = glue_features(
    ["question", "sentence"], ClassLabel(names=["entailment", "not_entailment"])
)
QQP_FEATURES = glue_features(
    ["question1", "question2"], ClassLabel(names=["not_duplicate", "duplicate"])
)
MNLI_FEATURES = glue_features(
    ["premise", "hypothesis"], ClassLabel(names=["entailment", "neutral", "contradiction"])
)
CONVAI2_FEATURES = Features(
    {
        "personality": List(Value("string")),
        "utterances": List({"candidates": List(Value("string")), "history": List(Value("string"))}),
    }
)
"""ConvAI2 / PersonaChat (``self_original``), one row per dialogue, in the layout of
TransferTransfo's ``personachat_self_original.json``: the persona sentences of the speaker whose
replies are the labels, and per turn the history so far (partner first) and 20 candidate replies
with the gold one **last** (the candidate scorer shuffles them)."""
