"""The device kit (scripts/device_kit.py, scripts/device_run.sh, scripts/gpu_summary.py): what a
kit carries and leaves to the GPU machine's image, its size limit, its offline install, and the
per-notebook summary of a GPU test run. The whole kit is dry-run offline as docs/gpu.md says (too
slow for CI: it builds a stand-in image); these tests cover each part on toy inputs."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.script_helpers import load_script
from tests.test_bundle import make_wheel
from tutorial_lib import backbones
from tutorial_lib.ops import bundle

REPO = Path(__file__).resolve().parents[1]


kit = load_script("device_kit")
summary = load_script("gpu_summary")


def test_the_image_list_parses_and_holds_what_the_kit_must_not_carry():
    image = kit.image_packages()
    assert image["torch"] == "2.11.0" and image["transformers"] == "5.17.0"
    assert "numpy" in image and "pyarrow" in image and "datasets" not in image
    assert kit.canonical("Jupyter_Client") == "jupyter-client"


def test_notebook_numbers():
    have = ["01", "02", "03", "04", "05", "14"]
    assert kit.notebook_numbers("all", have) == have
    assert kit.notebook_numbers("01-03", have) == ["01", "02", "03"]
    assert kit.notebook_numbers("14,02", have) == ["02", "14"]
    for bad in ("1-x", "07", "first"):
        with pytest.raises(kit.KitError, match="--notebooks"):
            kit.notebook_numbers(bad, have)


def test_the_kit_carries_what_the_image_lacks_and_nothing_of_its_own_packages():
    image = {"numpy": "2.5.2", "typer": None, "peft": None, "fsspec": None, "torch": "2.11.0"}
    closure = {"numpy": "2.4.6", "torch": "2.13.0", "datasets": "5.2.0", "dill": "0.4.1",
               "peft": "0.21.2", "jedi": "0.20.1", "pydantic": "2.14.4", "typer": "0.29.2"}
    assert kit.wheels_to_carry(closure, image) == {
        "datasets": "5.2.0", "dill": "0.4.1", "peft": "0.21.2", "pydantic": "2.14.4"}
    # what an image package needs is the image's business: typer's pydantic is not carried
    requires = {"datasets": ["dill", "numpy", "fsspec"], "typer": ["pydantic"], "peft": ["torch"],
                "ipython": ["jedi", "prompt-toolkit"], "prompt-toolkit": ["wcwidth"]}
    assert kit.reachable(["datasets==5.2.0", "typer==1", "peft==0.21.2", "ipython==9"], requires,
                         image) == {"datasets", "dill", "fsspec", "peft", "ipython", "prompt-toolkit",
                                    "wcwidth"}


def test_a_built_call_over_the_limit_is_refused_and_the_estimate_blamed():
    """The estimate (tests/test_kit_plan.py) refuses first; a kit that still came out too big
    says that the estimate was too low, and how to split when told."""
    mib = kit.MIB
    assert kit.check_payload(40 * mib, 11 * mib, "x") == 51 * mib
    with pytest.raises(kit.KitError, match=r"49\.0 MiB.*61\.0 MiB, over 60 MiB \(the estimate was too "
                       r"low: raise its ratios in scripts/kit_plan.py\): --notebooks 01-03"):
        kit.check_payload(49 * mib, 12 * mib, "notebooks 01-05 at gpu", split="--notebooks 01-03")


def test_the_tree_counts_tracked_and_untracked_files_git_does_not_ignore(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text(".device/\n")
    (tmp_path / "a.txt").write_bytes(b"x" * 100)
    (tmp_path / ".device").mkdir()
    (tmp_path / ".device" / "big").write_bytes(b"x" * 10_000)
    assert kit.tree_bytes(tmp_path) == 100 + len(".device/\n")


def test_a_config_only_model_wheel_has_no_weights_and_says_so_when_loaded(tmp_path, monkeypatch):
    full = make_wheel(tmp_path, "fakemodel", "0.1.0", files={
        "fakemodel/model/config.json": b"{}", "fakemodel/model/model.safetensors": b"w" * 1000,
        "fakemodel/weights.gguf": b"g" * 1000})
    out = tmp_path / "out"
    out.mkdir()
    light = bundle.config_only_wheel(full, out)
    assert light.name == "fakemodel-0.1.0+config-py3-none-any.whl"
    with zipfile.ZipFile(light) as z:
        names = z.namelist()
        assert "fakemodel/model/config.json" in names
        assert not any(n.endswith((".safetensors", ".gguf")) for n in names)
        assert b"Version: 0.1.0+config" in z.read("fakemodel-0.1.0+config.dist-info/METADATA")
    package = tmp_path / "installed" / "fakemodel"
    (package / "model").mkdir(parents=True)
    (package / "model" / "config.json").write_text("{}")
    spec = backbones.LocalModel("fakemodel", "pip install fakemodel", "encoder")
    monkeypatch.setitem(backbones.LOCAL_MODELS, "fake", spec)
    monkeypatch.setattr(backbones, "_package_dir", lambda _spec: package)
    with pytest.raises(backbones.WeightsNotInstalled, match="weights are not installed.*pip install"):
        backbones.model_path("fake")
    assert backbones.model_path("fake", weights=False) == package / "model"  # smoke: enough


def _tiny_kit(tmp_path: Path) -> Path:
    root = tmp_path / "kit"
    (root / "wheels").mkdir(parents=True)
    make_wheel(root / "wheels", "kitpkg", "1.0")
    data = tmp_path / "d.txt"
    data.write_text("rows\n")
    kit.write_xz([(data, "trec/d.txt")], root / "data.tar.xz")
    files = [{"path": str(p.relative_to(root)), "bytes": p.stat().st_size, "sha256": kit.sha256(p)}
             for p in sorted(root.rglob("*")) if p.is_file()]
    (root / kit.KIT_FILE).write_text(json.dumps({"scale": "smoke", "notebooks": ["02"], "files": files}))
    return root


def test_a_kit_installs_offline_and_a_damaged_one_is_one_error(tmp_path):
    root = _tiny_kit(tmp_path)
    info = kit.install(root, tmp_path / "site", tmp_path / "data", tmp_path / "cache")
    assert info["wheels"] == 1 and (tmp_path / "site" / "kitpkg" / "__init__.py").is_file()
    assert (tmp_path / "data" / "trec" / "d.txt").read_text() == "rows\n"
    with open(root / "data.tar.xz", "ab") as f:
        f.write(b"!")
    with pytest.raises(kit.KitError, match="data.tar.xz .* differs from kit.json: carry the kit again"):
        kit.verify(root)
    with pytest.raises(kit.KitError, match="has no kit.json"):
        kit.verify(tmp_path / "nothing")


def test_device_run_refuses_a_missing_kit_before_installing_anything(tmp_path):
    done = subprocess.run(["bash", "scripts/device_run.sh", str(tmp_path / "no-kit"), "--", "true"],
                          cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PY": sys.executable,
                               "DEVICE_SITE": str(tmp_path / "site")})
    assert done.returncode == 1 and "has no kit.json" in done.stderr
    assert not (tmp_path / "site").exists()


def test_unmet_requirements_names_each_with_what_was_found():
    unmet = kit.unmet_requirements(["pytest>=1", "pytest<1", "surely-not-installed-pkg>=1"])
    assert unmet[0].startswith("pytest<1: found ")
    assert unmet[1] == "surely-not-installed-pkg>=1: not installed"
    assert len(unmet) == 2


JUNIT = """<?xml version="1.0"?><testsuites><testsuite name="pytest">
<testcase name="Cell 0" file="notebooks/01_pretraining.ipynb" time="4.5"/>
<testcase name="Cell 1" file="notebooks/01_pretraining.ipynb" time="1.0">
<failure message="RuntimeError: Expected all tensors to be on the same device">trace</failure></testcase>
<testcase name="Cell 0" file="notebooks/02_adaptation.ipynb" time="2.0"/>
<testcase classname="tests.test_stats" name="test_a" time="0.5"/>
<testcase classname="tests.test_stats" name="test_b" time="0.25"><skipped message="no data"/></testcase>
</testsuite></testsuites>"""


def test_the_gpu_summary_counts_each_notebooks_cells(tmp_path):
    (tmp_path / "junit").mkdir()
    (tmp_path / "junit" / "a.xml").write_text(JUNIT)
    assert summary.main(["smoke", str(tmp_path / "junit"), str(tmp_path / "s.json"), "--seconds", "9",
                         "--exit-status", "1"]) == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    rows = doc["rows"]
    assert list(rows) == ["01_pretraining", "02_adaptation", "unit tests"]
    assert rows["01_pretraining"] == {"tests": 2, "failed": 1, "skipped": 0, "seconds": 5.5,
                                      "first_failure": "Cell 1: RuntimeError: Expected all tensors "
                                                       "to be on the same device", "passed": False}
    assert rows["unit tests"]["skipped"] == 1 and rows["unit tests"]["passed"]
    assert doc["notebooks_passed"] == 1 and doc["notebooks"] == 2 and doc["exit_status"] == 1


def test_the_committed_gpu_records_match_their_kit_and_sizes():
    """results/gpu: each call's machine record names a kit that fitted one call."""
    for record in sorted((REPO / "results" / "gpu").glob("**/machine*.json")):
        doc = json.loads(record.read_text())
        assert doc["cuda_available"] and doc["gpu"].startswith("NVIDIA")
        assert doc["kit"]["payload_bytes"] <= kit.PAYLOAD_LIMIT, record
        assert not doc["unmet_requirements"], doc["unmet_requirements"]
