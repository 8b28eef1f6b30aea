"""Tests for tutorial_lib.integrity: the cache lock (the records are tested with the faults,
tests/test_faults.py, and the hashes in tests/test_hashing.py)."""

import os
import subprocess
import sys
import time
from pathlib import Path

from tutorial_lib import integrity

REPO = Path(__file__).resolve().parents[1]


_HOLD = """
import sys, time
from pathlib import Path
from tutorial_lib import integrity
with integrity.cache_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("held")
    time.sleep(float(sys.argv[3]))
    Path(sys.argv[2]).write_text("released")
"""


def test_cache_lock_makes_another_process_wait_and_is_reentrant(tmp_path):
    entry, marker = tmp_path / "pretrained-causal-x", tmp_path / "marker"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(entry), str(marker), "1.5"],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.read_text() == "held"
        with integrity.cache_lock(entry):  # waits for the holder: it has finished when we get in
            assert marker.read_text() == "released"
            with integrity.cache_lock(entry):  # re-entrant: no dead-lock with itself
                pass
            assert str(tmp_path / ".pretrained-causal-x.lock") in integrity._held_locks
        assert not integrity._held_locks
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0
