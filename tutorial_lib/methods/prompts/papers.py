"""The papers' few-shot numbers notebook 09 sets beside its own (DART Table 1, LM-BFF Table 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

# DART Table 1 / LM-BFF Table 3, RoBERTa-large, K = 16, mean (std) over the 5 splits; the
# papers' head fine-tuning reads [CLS] (ours: the mean of the last hidden states). P-tuning (its
# template vectors through an LSTM, its label words fixed) as DART reports it. Recalled in the
# reference notes and tagged VERIFY there (methods/references.py reads them from here): shown
# as "unverified". DART's ablation table is not in the notes: only its direction is quoted.
PAPER_K16 = {
    "head fine-tuning": {"sst2": (81.4, 3.8), "mr": (76.9, 5.9), "cr": (75.8, 3.2)},
    "manual prompt": {"sst2": (92.3, 1.0), "mr": (85.5, 2.8), "cr": (89.0, 1.4)},
    "P-tuning": {"sst2": (92.2, 0.4), "mr": (86.7, 1.2), "cr": (91.8, 1.1)},
    "DART": {"sst2": (93.5, 0.5), "mr": (88.2, 1.0), "cr": (91.8, 0.5)},
}


def paper_table(tasks: Sequence[str], rename: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The paper's numbers for ``tasks`` as strings "93.5 ± 0.5 (unverified)" ("—" if absent);
    ``rename`` maps the paper's method names to the rows of this run's table (e.g. ``{"DART":
    "DART-style"}``), so that each method is one row."""
    rows = {}
    for method, by_task in PAPER_K16.items():
        rows[(rename or {}).get(method, method)] = {
            t: (f"{by_task[t][0]:.1f} ± {by_task[t][1]:.1f} (unverified)" if t in by_task else "—")
            for t in tasks}
    return pd.DataFrame(rows).T.rename_axis("method")
