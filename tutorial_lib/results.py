"""Saving each notebook's results so the main job can gather them into one summary.

A notebook ends with ``results.save("02_adaptation", scale, {"TREC-6 test error": table})``.
Files go to ``$TUTORIAL_RESULTS_DIR`` (the main job sets it), else to the cache. Every number
in a summary therefore comes from the run that wrote it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pandas as pd

from .config import Scale, cache_dir
from .runtime import describe

RESULTS_ENV_VAR = "TUTORIAL_RESULTS_DIR"


def results_dir(scale: Scale) -> Path:
    root = os.environ.get(RESULTS_ENV_VAR)
    path = Path(root) if root else cache_dir(scale.name) / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save(notebook: str, scale: Scale, tables: dict[str, pd.DataFrame], notes: str = "") -> Path:
    """Write ``<notebook>.json`` (tables as records + markdown) and return its path."""
    payload = {
        "notebook": notebook,
        "scale": scale.name,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "environment": describe(scale),
        "notes": notes,
        "tables": {
            name: {"markdown": table.to_markdown(),
                   "records": json.loads(table.reset_index().to_json(orient="records"))}
            for name, table in tables.items()
        },
    }
    path = results_dir(scale) / f"{notebook}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(path)
    return path


def summary_markdown(directory: Path, wall_times: dict[str, float] | None = None) -> str:
    """One markdown document from every ``*.json`` in ``directory`` (notebook order)."""
    parts = ["# Results summary\n"]
    for path in sorted(directory.glob("[0-9][0-9]_*.json")):  # one file per notebook
        blob = json.loads(path.read_text())
        parts.append(f"## {blob['notebook']}\n")
        parts.append(f"scale **{blob['scale']}**, run {blob['date']}")
        if wall_times and blob["notebook"] in wall_times:
            parts[-1] += f", notebook wall time {wall_times[blob['notebook']]:.0f} s"
        parts.append("\n```\n" + blob["environment"] + "\n```\n")
        for name, table in blob["tables"].items():
            parts.append(f"### {name}\n\n{table['markdown']}\n")
        if blob.get("notes"):
            parts.append(blob["notes"] + "\n")
    return "\n".join(parts)
