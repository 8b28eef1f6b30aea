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
``conll2003``       ``id``, ``tokens``, ``pos_tags`` (47 PTB tags), ``chunk_tags`` (23), ``ner_tags``
                    (9 IOB2 tags: O, B-/I-PER, ORG, LOC, MISC), each a list of ClassLabel in the
                    Hub's order; 14,041 / 3,250 (testa) / 3,453 (testb) sentences
``squad``           ``id``, ``title``, ``context``, ``question``, ``answers`` = {``text``: list,
                    ``answer_start``: list of int32}; train + validation (= v1.1 dev, 10,570
                    questions). **The local train split is a subset**: the first 11 articles,
                    3,807 of 87,599 questions (:func:`source_of` says so); the local dev is rebuilt,
                    3,833 of its 34,726 answer offsets inferred (texts exact)
``convai2``         ``personality`` (list of str), ``utterances`` (list of ``{candidates,
                    history}``; 20 candidates, gold reply last): one row per dialogue
==================  ==========================================================================

Split names are always among ``train``, ``validation`` and ``test``. GLUE test splits are
unlabeled (``label == -1``, as on the Hub). The local copy holds only part of some GLUE tasks
(QNLI: validation + test; QQP: a 20,000-row train subset; MNLI: matched dev only), and of SQuAD
(train: 11 of 442 articles); online, the Hub gives the whole splits.

Validation splits. When a dataset has a ``train`` split but no ``validation`` split,
``validation_fraction`` of train is carved off as ``validation``, reproducibly for a given
``seed`` and stratified by the label when there is a ClassLabel label; a ``test`` split is
never touched. ``validation_fraction=0`` keeps train whole.

The SentEval sets ``mr``, ``cr``, ``mpqa`` and ``subj`` have no official split in the local
copy: they get a fixed, stratified 80/10/10 train/validation/test split made with the seed
:data:`SENTEVAL_SPLIT_SEED`, so their test split never changes (``validation_fraction`` and
``seed`` do not apply to them). Blank lines are dropped. This split differs from the fixed
split of the Hub's ``rotten_tomatoes`` (8,530/1,066/1,066), which ``mr`` uses when loaded from
the Hub, so scores from the two sources are not comparable. The same holds for ``cr`` and
``subj`` (SetFit's train/test, validation carved from train) and ``mpqa`` (``jxm/mpqa``'s
train/dev/test).

ConvAI2 (PersonaChat ``self_original``): the local copy holds only the official validation split
(1,000 dialogues, 7,801 turns). :func:`load` splits it **by dialogue** with the fixed seed
:data:`CONVAI2_SPLIT_SEED` into train 700 / validation 100 / test 200 dialogues
(:data:`CONVAI2_SPLIT_SIZES`; ``validation_fraction`` and ``seed`` do not apply). From the Hub
(``AlekseyKorshuk/persona-chat``, TransferTransfo's JSON) validation and test are the same 100
and 200 dialogues and train is the official training split (17,878 dialogues), so test scores
agree across sources and training sets do not.

Other differences between the two sources (tested offline in
``tests/test_data_hub_schemas.py``): the Hub's MRPC text is tokenized (``brother , whom``); one
RTE train sentence loses its leading space; the Hub has splits the local copy lacks (WNLI test,
QNLI train, QQP validation and test, all GLUE test splits unlabeled); and QQP's ``idx`` is the
row number on the Hub but the QQP pair id (e.g. ``133273``) in the local copy.

Results are memoised in-process per ``(name, validation_fraction, seed, source)``, and file
verification per ``(path, size, mtime)``; :func:`clear_cache` forgets both.

Where the data comes from, and what goes wrong. A ``TUTORIAL_DATA_DIR`` that is not a
directory, or that lacks the dataset's folder, is an error that says so (it never falls back to
the Hub silently). With no local copy and the Hub out of reach (``HF_HUB_OFFLINE`` /
``HF_DATASETS_OFFLINE`` set, or no network) one error says to set ``TUTORIAL_DATA_DIR`` or go
online (a dataset the Hub does not know is a different error). :func:`source_of` names the
local copy as ``$TUTORIAL_DATA_DIR``, never by its path. From the Hub, a split that should hold
the local copy's rows but differs from the fingerprint recorded from it (``fingerprints.json``:
rows, label sets, a sha256 of the rows) is one error naming the dataset, the split and what differs.

Modules: :mod:`.schema` (features and label names), :mod:`.local` (parsers of the local files),
:mod:`.registry` (the table above, in code, and the sha256 table), :mod:`.verify` (checking the
local copy), :mod:`.hub` (loading from the Hub and normalising it), :mod:`.loading`
(:func:`load` itself), :mod:`.fingerprints` (the recorded content of every local split, which the
Hub path checks its downloads against), :mod:`.environment` and :mod:`.errors`.
"""

from .columns import column, split_indices, train_test_split
from .environment import DATA_ENV_VAR, data_dir
from .errors import DataError
from .loading import clear_cache, fingerprint, load, source_of
from .local import CONVAI2_SPLIT_SEED, CONVAI2_SPLIT_SIZES, SENTEVAL_SPLIT_SEED, split_by_dialogue
from .registry import EXPECTED_SHA256, DatasetSpec, HubSpec, list_datasets
from .schema import (
    COLA_FEATURES,
    CONLL2003_FEATURES,
    CONLL_NER,
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
    TREC_COARSE,
    TREC_FEATURES,
    TREC_FINE,
    UD_FEATURES,
    UPOS,
    WNLI_FEATURES,
)
from .verify import verify_file

__all__ = [
    "COLA_FEATURES",
    "CONLL2003_FEATURES",
    "CONLL_NER",
    "CONVAI2_FEATURES",
    "CONVAI2_SPLIT_SEED",
    "CONVAI2_SPLIT_SIZES",
    "DATA_ENV_VAR",
    "EXPECTED_SHA256",
    "MNLI_FEATURES",
    "MRPC_FEATURES",
    "POLARITY",
    "QNLI_FEATURES",
    "QQP_FEATURES",
    "RTE_FEATURES",
    "SENTEVAL_SPLIT_SEED",
    "SPLITS",
    "SQUAD_FEATURES",
    "SST2_FEATURES",
    "SST5_NAMES",
    "STSB_FEATURES",
    "SUBJ_NAMES",
    "TREC_COARSE",
    "TREC_FEATURES",
    "TREC_FINE",
    "UD_FEATURES",
    "UPOS",
    "WNLI_FEATURES",
    "DataError",
    "DatasetSpec",
    "HubSpec",
    "clear_cache",
    "column",
    "data_dir",
    "fingerprint",
    "list_datasets",
    "load",
    "source_of",
    "split_by_dialogue",
    "split_indices",
    "train_test_split",
    "verify_file",
]
