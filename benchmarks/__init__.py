"""Performance benchmarks of ``tutorial_lib`` (see ``benchmarks/README.md``)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from tutorial_lib.methods.prompts.settings import DARTSettings
from tutorial_lib.runtime import atomic_write


def write_json(path: Path, doc: dict) -> dict:
    """``doc`` stamped with today's date (first key) and written to ``path`` atomically: a sweep
    that writes after every run and is cut off keeps its last whole file. Returns the stamped doc."""
    stamped = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               **{k: v for k, v in doc.items() if k != "date"}}
    atomic_write(path, json.dumps(stamped, indent=1, default=str))
    return stamped


def dart_fields(s: DARTSettings) -> dict:
    """The few-shot settings every SST-2 prompt benchmark records beside its runs."""
    return {"task": "sst2", "k": s.k, "test_examples": s.test_examples, "batch_size": s.batch_size,
            "eval_every": s.eval_every, "backbone": s.backbone,
            # results written before 2026-12-05 drew from GLUE's rows, mostly phrases (they say so)
            "splits_from": "tasks.few_shot_pool: LM-BFF's 6,920 whole SST-2 training sentences"}
