"""scripts/data_source.py and scripts/preflight.sh: where a run's data comes from, decided before
anything is installed — and, with no copy and no Hub, one clear error in seconds, nothing written."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.script_helpers import load_script

REPO = Path(__file__).resolve().parents[1]
data_source = load_script("data_source")
NoData, decide = data_source.NoData, data_source.decide

ONLINE, OFFLINE = (lambda: True), (lambda: False)


def never(): raise AssertionError("the Hub was asked although the rule decides before it")


def test_a_given_copy_wins_and_must_exist(tmp_path):
    d = decide({"TUTORIAL_DATA_DIR": str(tmp_path)}, "smoke", tmp_path / "none", never)
    assert (d.source, d.data_dir) == ("local", str(tmp_path))
    with pytest.raises(NoData, match="is not a folder"):
        decide({"TUTORIAL_DATA_DIR": str(tmp_path / "missing")}, "smoke", tmp_path, never)


def test_an_empty_data_dir_means_the_cache_a_prefetch_filled(tmp_path):
    d = decide({"TUTORIAL_DATA_DIR": ""}, "smoke", tmp_path, never)
    assert (d.source, d.data_dir) == ("cache", "")


def test_the_shared_copy_beside_the_checkout(tmp_path):
    d = decide({}, "smoke", tmp_path, never)
    assert (d.source, d.data_dir) == ("local", str(tmp_path.resolve()))


def test_no_copy_online_prefetches_first_and_a_finished_prefetch_is_remembered(tmp_path, capsys):
    env = {"HF_HOME": str(tmp_path / "hf")}
    assert decide(env, "smoke", tmp_path / "none", ONLINE).source == "prefetch"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", env["HF_HOME"])
        assert data_source.main(["--scale", "smoke", "--mark"]) == 0
    assert decide(env, "smoke", tmp_path / "none", never).source == "cache"  # offline from now on
    with pytest.raises(NoData):  # another scale was not prefetched
        decide(env, "gpu", tmp_path / "none", OFFLINE)


@pytest.mark.parametrize("env, reason", [
    ({}, "the Hugging Face Hub cannot be reached"),
    ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE=1 is set"),
])
def test_no_copy_and_no_hub_names_both_remedies(tmp_path, env, reason):
    env = {"HF_HOME": str(tmp_path / "hf"), **env}
    reachable = ONLINE if env.get("HF_HUB_OFFLINE") else OFFLINE  # the flag wins over a network
    with pytest.raises(NoData) as e:
        decide(env, "smoke", tmp_path / "none", reachable)
    message = str(e.value)
    assert reason in message
    assert "TUTORIAL_DATA_DIR" in message and "prefetch --scale smoke" in message


def test_the_hub_probe_fails_fast_on_a_closed_port():
    start = time.monotonic()
    assert not data_source.hub_reachable({"HF_ENDPOINT": "http://127.0.0.1:9"}, timeout=2)
    assert time.monotonic() - start < 5


def test_the_shell_lines_round_trip_through_bash():
    d = data_source.Decision("local", "/a path/with 'quotes'", "why: it's here")
    out = subprocess.run(["bash", "-c", d.shell() + 'printf "%s|%s" "$TUTORIAL_DATA_DIR" "$DATA_SOURCE"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "/a path/with 'quotes'|local"


def _clone_without_data(tmp_path: Path) -> Path:
    """The scripts of a checkout with no ../shared/data beside it."""
    repo = tmp_path / "clone" / "repo"
    shutil.copytree(REPO / "scripts", repo / "scripts")
    return repo


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def _run(repo: Path, tmp_path: Path, **env) -> tuple[subprocess.CompletedProcess, float]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("TUTORIAL_DATA_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    base.update({"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9",
                 "PYTHON": sys.executable, "PYTHONDONTWRITEBYTECODE": "1"}, **env)
    start = time.monotonic()
    done = subprocess.run(["bash", str(repo / "scripts" / "test.sh")], env=base, capture_output=True,
                          text=True, timeout=60)
    return done, time.monotonic() - start


def test_the_test_command_offline_with_no_copy_stops_in_seconds_writing_nothing(tmp_path):
    repo = _clone_without_data(tmp_path)
    before = _files(tmp_path)
    done, seconds = _run(repo, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert seconds < 30
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no data" in errors[0], done.stderr
    assert "TUTORIAL_DATA_DIR" in done.stderr and "prefetch --scale smoke" in done.stderr
    assert _files(tmp_path) == before  # no .venv, no stamp, nothing


def test_the_test_command_refuses_an_old_python_first(tmp_path):
    repo = _clone_without_data(tmp_path)
    fake = tmp_path / "python3.10"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "Python 3.10.12"; exit 0; }\nexit 1\n')
    fake.chmod(0o755)
    before = _files(tmp_path)
    done, seconds = _run(repo, tmp_path, PYTHON=str(fake))
    assert done.returncode == 2 and seconds < 10
    assert "needs Python >= 3.11" in done.stderr and "Python 3.10.12" in done.stderr
    assert _files(tmp_path) == before
