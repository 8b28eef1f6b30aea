"""The GitHub workflows: what they must do and must never do (actionlint checks their syntax in
scripts/test.sh; here we check their content against the repository)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tutorial_lib import REPO_SLUG

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _load(name: str) -> dict:
    wf = yaml.safe_load((WORKFLOWS / name).read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]


def test_ci_runs_the_readme_test_command_with_a_pip_cache():
    wf = _load("ci.yml")
    (job,) = wf["jobs"].values()
    assert "bash scripts/test.sh" in _runs(job)
    python = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    assert python["with"]["cache"] == "pip"
    assert "download.pytorch.org/whl/cpu" in job["env"]["TORCH_INDEX_URL"]  # no CUDA wheels on CPU


def test_gpu_workflow_never_runs_for_pull_requests_or_in_forks():
    wf = _load("notebooks-gpu.yml")
    assert set(wf["on"]) == {"push", "schedule", "workflow_dispatch"}
    assert wf["on"]["push"]["branches"] == ["main"]
    first = wf["jobs"]["prefetch"]
    assert f"github.repository == '{REPO_SLUG}'" in first["if"]
    for name, job in wf["jobs"].items():
        assert job["runs-on"] == ["self-hosted", "gpu"], name
        if name != "prefetch":  # every other job waits for the guarded one
            assert "prefetch" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
    assert wf["permissions"] == {"contents": "read"}


def test_gpu_workflow_prefetches_then_runs_each_notebook_offline_one_at_a_time():
    wf = _load("notebooks-gpu.yml")
    assert "python -m tutorial_lib.ops.prefetch --scale gpu" in _runs(wf["jobs"]["prefetch"])
    assert "actions/cache" in _uses(wf["jobs"]["prefetch"])
    leg = wf["jobs"]["notebook"]
    assert leg["strategy"]["max-parallel"] == 1
    assert leg["strategy"]["matrix"]["notebook"] == NOTEBOOKS, "one leg per notebook, in order"
    assert leg["env"]["HF_HUB_OFFLINE"] == "1" and wf["env"]["TUTORIAL_SCALE"] == "gpu"
    assert "actions/cache/restore" in _uses(leg)
    runs = _runs(leg)
    assert "torch.cuda.is_available()" in runs and "assert" in runs
    assert "--nbval-lax" in runs and "--nbval-current-env" in runs
    nbval = next(s for s in leg["steps"] if "--nbval-lax" in s.get("run", ""))
    assert nbval["timeout-minutes"] <= 10, "the gpu scale is sized to <= 10 min a notebook"
    for job in (leg, wf["jobs"]["report"]):
        assert "actions/upload-artifact" in _uses(job)
    assert "--report-only" in _runs(wf["jobs"]["report"])


def test_merging_the_legs_keeps_every_wall_time(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import merge_gpu_results
    finally:
        sys.path.remove(str(REPO / "scripts"))
    for stem, seconds in (("01_pretraining", 300.0), ("02_adaptation", 200.0)):
        leg = tmp_path / "artifacts" / f"gpu-{stem}"
        (leg / "notebooks").mkdir(parents=True)
        (leg / "notebooks" / f"{stem}.ipynb").write_text("{}")
        (leg / f"{stem}.json").write_text("{}")
        (leg / "wall_times.json").write_text(f'{{"{stem}": {seconds}}}')
    times = merge_gpu_results.merge(tmp_path / "artifacts", tmp_path / "out")
    assert times == {"01_pretraining": 300.0, "02_adaptation": 200.0}
    assert sorted(p.name for p in (tmp_path / "out" / "notebooks").iterdir()) == [
        "01_pretraining.ipynb", "02_adaptation.ipynb"]


def _actionlint() -> str | None:
    local = Path(sys.executable).parent / "actionlint"
    return str(local) if local.exists() else shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None, reason="actionlint not installed (pip install -e .[dev])")
def test_actionlint_accepts_ours_and_rejects_a_broken_workflow(tmp_path):
    ours = subprocess.run([_actionlint()], cwd=REPO, capture_output=True, text=True)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    broken = tmp_path / ".github" / "workflows"
    broken.mkdir(parents=True)
    (broken / "x.yml").write_text("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n"
                                  "    steps:\n      - run: echo ${{ github.no_such_thing }}\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    bad = subprocess.run([_actionlint()], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "no_such_thing" in bad.stdout


def test_the_gpu_runs_refuse_a_machine_without_a_gpu_and_write_nothing(tmp_path):
    """scripts/gpu_runs.sh measures a GPU: on a CPU it stops at once with one message, and nothing
    (no machine.json, no results) is written."""
    out = tmp_path / "gpu"
    done = subprocess.run(["bash", str(REPO / "scripts" / "gpu_runs.sh"), "--minutes", "1"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "GPU_RUNS_OUT": str(out),
                               "PY": sys.executable})
    assert done.returncode != 0
    assert "no CUDA device" in done.stderr and "never simulated" in done.stderr
    assert not out.exists()
    bad = subprocess.run(["bash", str(REPO / "scripts" / "gpu_runs.sh"), "--fast"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage:")
