"""Content fingerprints of every split: what the Hub path checks its download against.

Most Hub specs in :mod:`.registry` carry no ``revision`` (and two follow the moving
``refs/convert/parquet``), and no machine that builds this project reaches the Hub to pin one. So
the *content* is pinned instead: ``fingerprints.json`` (next to this module, committed) records,
for every split of every dataset in the local copy, its row count, the label set of each
ClassLabel column and a sha256 of its rows, computed from the local copy with

    TUTORIAL_DATA_DIR=/path/to/data python -m tutorial_lib.ops.fingerprints --write

(:mod:`tutorial_lib.ops.fingerprints`; without ``--write`` it compares the local copy with the
committed file, prints the table and exits 1 on a difference). A split is fingerprinted where both
sources meet: a :class:`datasets.Dataset` in the registry's schema, before ConvAI2's split by
dialogue and before a validation split is carved (both are seeded functions of these rows, so
fingerprinting their input pins what the notebooks read).

The canonical form: one line per row, **in the split's order** (the carved validation split and
the seeded SentEval and ConvAI2 splits depend on it, so a reordered split is a changed split),
each line ``json.dumps`` of the row over the schema's columns with ``sort_keys=True``,
``ensure_ascii=False`` and compact separators; ClassLabels as their ints (the schema fixes the
names and their order), floats and ints as Python reads them from Arrow (STS-B's float32 scores
give the same float from either source). The sha256 is taken over those lines, each ending in
``"\\n"``, UTF-8 encoded. Label sets name the labels (``null`` for -1, unlabelled).

Where it is checked. :func:`check_hub` runs on every Hub load (:func:`.hub.load_hub`) for the
splits the Hub is expected to serve as the local copy does; a difference is one
:class:`~.errors.DataError` naming the dataset, the split and what differs (rows, a label set,
the content), and what to do. The splits the Hub serves differently *by design* are listed in
:data:`HUB_DIFFERS` with the reason and not checked; Hub-only splits (QNLI train, WikiText-103,
...) have no fingerprint and are not checked either. The local path does not check: its files are
verified by sha256 before the (deterministic) parsers run, and ``tests/test_data_fingerprints.py``
pins the parsers' output to the committed fingerprints, so a check there would only repeat both.

Not to be confused with :func:`tutorial_lib.data.fingerprint` (the cache key: file hashes or the
Hub id).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, List

from .environment import DATA_ENV_VAR
from .errors import DataError
from .registry import DatasetSpec
from .schema import SPLITS
from .verify import verify_local

FINGERPRINTS_FILE = Path(__file__).with_name("fingerprints.json")
WRITE_COMMAND = "python -m tutorial_lib.ops.fingerprints --write"

HUB_DIFFERS: dict[str, dict[str, str]] = {
    "mrpc": dict.fromkeys(SPLITS, "the Hub's text is tokenized (brother , whom), the local TSV's is not"),
    "rte": {"train": "one sentence1 keeps a leading space in the local TSV that the Hub strips"},
    "qnli": {
        "validation": "5 rows differ in the Hub's quote handling (MANIFEST.md)",
        "test": "read by the Hub with validation's quote handling (not compared; assumed to differ)",
    },
    "qqp": {"train": "the local copy is a 20,000-row subset whose idx is the pair id, not the row number"},
    **{
        name: dict.fromkeys(SPLITS, "the local copy's seeded 80/10/10 split; the Hub serves its own split")
        for name in ("mr", "cr", "mpqa", "subj")
    },
    "squad": {
        "train": "the local copy is a subset (the first 11 of 442 articles)",
        "validation": "the local dev set is rebuilt: 3,833 answer offsets inferred",
    },
}
"""Dataset -> split -> why the Hub's rows of that split are not the local copy's (MANIFEST.md,
the package docstring, ``tests/test_data_hub_schemas.py``): those splits are not checked."""


# ------------------------------------------------------------------------ computing


def canonical_rows(ds: Dataset, features: Features) -> Iterator[str]:
    """The canonical line of every row of ``ds``, in order, over the columns of ``features``."""
    columns = list(features)
    for batch in ds.select_columns(columns).with_format(None).iter(batch_size=1000):
        for values in zip(*(batch[c] for c in columns)):
            yield json.dumps(dict(zip(columns, values)), sort_keys=True, ensure_ascii=False,
                             separators=(",", ":"))


def _label_columns(features: Features) -> dict[str, ClassLabel]:
    """The ClassLabel of every column that is one, or a list of one (UD's upos, CoNLL's tags)."""
    out = {}
    for col, feature in features.items():
        inner = feature.feature if isinstance(feature, List) else feature
        if isinstance(inner, ClassLabel):
            out[col] = inner
    return out


def _names(labels: list[str | None]) -> str:
    """``[positive, (unlabelled)]``."""
    return "[" + ", ".join("(unlabelled)" if n is None else n for n in labels) + "]"


@dataclass(frozen=True)
class SplitPrint:
    """The fingerprint of one split: rows, label set per ClassLabel column, sha256 of the rows."""

    rows: int
    labels: Mapping[str, list[str | None]]
    sha256: str

    def differences(self, got: SplitPrint) -> list[str]:
        """What differs in ``got`` (found) from ``self`` (recorded), one phrase each."""
        out = []
        if got.rows != self.rows:
            out.append(f"{got.rows:,} rows, recorded {self.rows:,}")
        for col, names in self.labels.items():
            found = got.labels.get(col, [])
            new, gone = [n for n in found if n not in names], [n for n in names if n not in found]
            parts = [f"{what} {_names(ls)}" for what, ls in (("new", new), ("missing", gone)) if ls]
            if parts:
                out.append(f"label set of {col}: {', '.join(parts)}")
        if got.sha256 != self.sha256:
            out.append(f"content sha256 {got.sha256[:12]}…, recorded {self.sha256[:12]}…")
        return out


def split_print(ds: Dataset, features: Features) -> SplitPrint:
    """Fingerprint of one split in the registry schema ``features``."""
    digest = hashlib.sha256()
    for line in canonical_rows(ds, features):
        digest.update(line.encode("utf-8") + b"\n")
    labels = {}
    for col, names in _label_columns(features).items():
        values = ds.with_format(None)[col]
        if isinstance(features[col], List):
            values = [v for row in values for v in row]
        labels[col] = [None if v < 0 else names.int2str(v) for v in sorted(set(values))]
    return SplitPrint(len(ds), labels, digest.hexdigest())


def dataset_prints(dd: DatasetDict, features: Features) -> dict[str, SplitPrint]:
    """Fingerprint of every split of ``dd``, in :data:`~.schema.SPLITS` order."""
    return {split: split_print(dd[split], features) for split in SPLITS if split in dd}


def local_prints(spec: DatasetSpec, root: Path) -> dict[str, SplitPrint]:
    """Fingerprints of ``spec``'s splits as the local copy under ``root`` gives them (verified)."""
    if spec.parse_local is None:
        raise DataError(f"{spec.name} is not part of the local copy: it has no fingerprint")
    verify_local(spec, root)
    return dataset_prints(spec.parse_local(root), spec.features)


# -------------------------------------------------------------------- the recorded file


@cache
def recorded() -> dict[str, dict[str, SplitPrint]]:
    """The committed fingerprints: dataset -> split -> :class:`SplitPrint`."""
    try:
        raw = json.loads(FINGERPRINTS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {FINGERPRINTS_FILE.name} ({err}); reinstall tutorial_lib or "
                        f"regenerate it: {WRITE_COMMAND}") from err
    return {name: {split: SplitPrint(**p) for split, p in splits.items()}
            for name, splits in raw["datasets"].items()}


def to_json(prints: Mapping[str, Mapping[str, SplitPrint]]) -> str:
    """The file's text: how it was made, then dataset -> split -> fingerprint, one split a line."""
    about = ("Content fingerprints of the local copy's splits (tutorial_lib/data/fingerprints.py says how "
             f"they are computed); regenerate with: {WRITE_COMMAND}")
    datasets = ",\n".join(
        f"  {json.dumps(name)}: {{\n" + ",\n".join(
            f"   {json.dumps(split)}: {json.dumps(asdict(p), ensure_ascii=False)}"
            for split, p in splits.items()
        ) + "\n  }"
        for name, splits in sorted(prints.items())
    )
    return f'{{\n "about": {json.dumps(about)},\n "datasets": {{\n{datasets}\n }}\n}}\n'


# ------------------------------------------------------------------------ checking


def hub_checked(name: str) -> dict[str, SplitPrint]:
    """The recorded splits of ``name`` the Hub must match (all but :data:`HUB_DIFFERS`)."""
    differs = HUB_DIFFERS.get(name, {})
    return {s: p for s, p in recorded().get(name, {}).items() if s not in differs}


def check_hub(spec: DatasetSpec, dd: DatasetDict) -> None:
    """DataError when ``dd`` (from the Hub, normalised) differs from the recorded fingerprints."""
    problems = []
    for split, want in hub_checked(spec.name).items():
        if split not in dd:
            problems.append(f"split {split}: missing (recorded {want.rows:,} rows)")
            continue
        diffs = want.differences(split_print(dd[split], spec.features))
        if diffs:
            problems.append(f"split {split}: " + "; ".join(diffs))
    if problems:
        rev = spec.hub.revision
        why = (f"the Hub's copy at revision {rev} differs (a branch such as refs/convert/parquet moves)"
               if rev else "the Hub's copy changed since it was recorded (no revision is pinned)")
        raise DataError(
            f"{spec.name} from {spec.hub.describe()} is not the data it was recorded with "
            f"(tutorial_lib/data/fingerprints.json): {' | '.join(problems)}. So {why}. To use the "
            f"recorded data, set {DATA_ENV_VAR} to the local copy (see README). Maintainers: pin "
            "revision= in the dataset's HubSpec (tutorial_lib/data/registry.py) to a Hub commit that "
            "serves the recorded content or, once the new content is checked and accepted, list the "
            "split with the reason in HUB_DIFFERS (tutorial_lib/data/fingerprints.py)"
        )
