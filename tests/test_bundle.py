"""The offline bundle (``prefetch --bundle``), without network: tiny wheels built here served by a
local find-links directory (a fake torch among them, to see it left out), a tiny fake data copy
with its sha256, parts of 1 MiB; read back in Python and by scripts/install_bundle.sh."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tutorial_lib.data import registry
from tutorial_lib.data.verify import clear_verified
from tutorial_lib.ops import bundle, unbundle

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def make_wheel(directory: Path, name: str, version: str, requires=(), files=None) -> Path:
    """A minimal pure-Python wheel (what pip needs: METADATA, WHEEL, RECORD)."""
    info = f"{name}-{version}.dist-info"
    content = {f"{name}/__init__.py": b"VALUE = 1\n", **(files or {}),
               f"{info}/METADATA": ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                    + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                b"Tag: py3-none-any\n"}
    record = "".join(",".join(bundle._record_line(p, d)) + "\n" for p, d in content.items())
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for p, d in content.items():
            whl.writestr(p, d)
        whl.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


@pytest.fixture
def index(tmp_path, monkeypatch):
    """pip options for a local index: tinypkg → tinydep; torch (fake) → torchonlydep. pip's own
    configuration (files, PIP_* variables: e.g. a find-links with a real torch) is ignored."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    links = tmp_path / "links"
    links.mkdir()
    make_wheel(links, "tinypkg", "1.0", ["tinydep>=1", "torch>=2", "neverdep; python_version < '3'"])
    make_wheel(links, "tinydep", "1.1")
    make_wheel(links, "torch", "2.13.0", ["torchonlydep"])
    make_wheel(links, "torchonlydep", "1.0")
    return ["--no-index", "--find-links", str(links)]


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A tiny data copy holding TREC's two files (2.5 MiB and 1 KiB) with their sha256."""
    root = tmp_path / "data"
    (root / "trec").mkdir(parents=True)
    (root / "MANIFEST.md").write_text("# a fake copy\n")
    contents = {"trec/train_5500.label": os.urandom(5 * MiB // 2), "trec/TREC_10.label": b"x" * 1024}
    for rel, data in contents.items():
        (root / rel).write_bytes(data)
        monkeypatch.setitem(registry.EXPECTED_SHA256, rel, hashlib.sha256(data).hexdigest())
    clear_verified()
    return root


def build_tiny(out: Path, index, data_root: Path) -> dict:
    return bundle.build(out, "smoke", ["trec"], [], part_size="1M", pythons=("3.11",),
                        requirements=["tinypkg==1.0"], index=index, data_root=data_root,
                        log=lambda _line: None)


def test_tiny_bundle_parts_manifest_and_round_trip(tmp_path, index, fake_data):
    out = tmp_path / "bundle"
    manifest = build_tiny(out, index, fake_data)
    parts = sorted(out.glob("part-*"))
    assert [p.name for p in parts] == [p["name"] for p in manifest["parts"]]
    assert len(parts) >= 3 and all(p.stat().st_size <= MiB for p in parts)
    assert all(p.stat().st_size == MiB for p in parts[:-1])
    for p, rec in zip(parts, manifest["parts"]):
        assert hashlib.sha256(p.read_bytes()).hexdigest() == rec["sha256"]
    files = {f["path"]: f for f in manifest["files"]}
    # torch and what only torch needs are left out; the marker-excluded dependency too
    assert sorted(p for p in files if p.startswith("wheels/")) == [
        "wheels/tinydep-1.1-py3-none-any.whl", "wheels/tinypkg-1.0-py3-none-any.whl"]
    assert {"bundle.json", "requirements.txt", "data/MANIFEST.md", "data/trec/train_5500.label",
            "data/trec/TREC_10.label"} <= set(files)
    big = files["data/trec/train_5500.label"]
    assert len(big["parts"]) >= 3  # 2.5 MiB across 1 MiB parts
    assert big["sha256"] == registry.EXPECTED_SHA256["trec/train_5500.label"]
    # reassembly: every file back, byte for byte, with the manifest's sha256
    dest = tmp_path / "unpacked"
    unbundle.unpack(out, dest)
    assert (dest / "data/trec/train_5500.label").read_bytes() == (
        fake_data / "trec/train_5500.label").read_bytes()
    for f in manifest["files"]:
        data = (dest / f["path"]).read_bytes()
        assert len(data) == f["size"] and hashlib.sha256(data).hexdigest() == f["sha256"]
    assert (dest / "requirements.txt").read_text() == "tinypkg==1.0\n"
    assert json.loads((dest / "bundle.json").read_text())["excluded"] == ["torch"]
    # the shell side agrees: SHA256SUMS / FILES.sha256 in sha256sum's format
    env = {**os.environ, "BUNDLE_DEST": str(tmp_path / "sh")}
    script = subprocess.run(["bash", str(REPO / "scripts/install_bundle.sh"), "--verify-only", str(out)],
                            capture_output=True, text=True, env=env)
    assert script.returncode == 0, script.stderr
    assert (tmp_path / "sh/wheels/tinypkg-1.0-py3-none-any.whl").is_file()


def test_a_corrupt_or_missing_part_is_one_clear_error(tmp_path, index, fake_data):
    out = tmp_path / "bundle"
    build_tiny(out, index, fake_data)
    part = out / "part-001"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(bundle.BundleError, match=r"part-001 is corrupt .* copy it again .*"
                                                  r"tutorial_lib.ops.prefetch --scale smoke --bundle DIR"):
        unbundle.unpack(out, tmp_path / "dest")
    script = ["bash", str(REPO / "scripts/install_bundle.sh"), "--verify-only", str(out)]
    done = subprocess.run(script, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("ERROR: bundle part part-001 is corrupt")
    assert "--bundle DIR" in done.stderr
    part.unlink()
    with pytest.raises(bundle.BundleError, match="part-001 is missing"):
        unbundle.verify_parts(out)
    done = subprocess.run(script, capture_output=True, text=True)
    assert done.returncode == 1 and "part part-001 is missing" in done.stderr


def test_bad_data_or_size_fails_before_anything_is_written(tmp_path, index, fake_data, monkeypatch):
    monkeypatch.setitem(registry.EXPECTED_SHA256, "trec/TREC_10.label", "0" * 64)
    with pytest.raises(Exception, match="sha256 mismatch"):
        build_tiny(tmp_path / "bundle", index, fake_data)
    assert not (tmp_path / "bundle").exists()
    with pytest.raises(bundle.BundleError, match="not a size"):
        bundle.parse_size("sixty")
    with pytest.raises(bundle.BundleError, match="below 1M"):
        bundle.parse_size("500K")
    assert bundle.parse_size("60M") == 60 * MiB and bundle.parse_size("4G") == 4 << 30


def test_requirements_are_the_constraints_pins_without_torch():
    pins = bundle.constraints()
    reqs = bundle.top_level_requirements()
    names = [r.split("==")[0] for r in reqs]
    assert "torch" not in names
    assert {"transformers", "datasets", "pytorch-ignite", "nbval", "ipykernel", "gguf"} <= set(names)
    for r in reqs:
        name, _, version = r.partition("==")
        assert version == pins.get(name, "")  # exact versions; setuptools (build backend) unpinned


def test_bf16_wheel_halves_the_weights_and_installs(tmp_path):
    weights = {"w": torch.randn(64, 64), "ids": torch.arange(8)}
    save_file(weights, tmp_path / "model.safetensors")
    stored = (tmp_path / "model.safetensors").read_bytes()
    src = make_wheel(tmp_path, "tinymodel", "0.1.0", files={"tinymodel/model/model.safetensors": stored})
    (tmp_path / "out").mkdir()
    out = bundle.bf16_wheel(src, tmp_path / "out")
    assert out.name == "tinymodel-0.1.0+bf16-py3-none-any.whl"
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           "--target", str(target), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # pip accepts the rewritten RECORD and version
    loaded = load_file(target / "tinymodel/model/model.safetensors")
    assert loaded["w"].dtype == torch.bfloat16 and loaded["ids"].dtype == torch.int64
    assert torch.equal(loaded["w"], weights["w"].to(torch.bfloat16))
    assert (target / "tinymodel/model/model.safetensors").stat().st_size < 0.6 * (
        tmp_path / "model.safetensors").stat().st_size


BACKEND = '''
import base64, hashlib, zipfile
def get_requires_for_build_wheel(config_settings=None):
    return []
def line(p, d):
    digest = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    return f"{{p}},sha256={{digest}},{{len(d)}}"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = "{name}-1.0.dist-info"
    files = {{"{name}.py": b"X = 1\\n",
             info + "/METADATA": b"Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n",
             info + "/WHEEL": b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: {tag}\\n"}}
    out = "{name}-1.0-{tag}.whl"
    with zipfile.ZipFile(wheel_directory + "/" + out, "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
        record = "".join(line(p, d) + "\\n" for p, d in files.items())
        z.writestr(info + "/RECORD", record + info + "/RECORD,,\\n")
    return out
'''


def make_sdist(directory: Path, name: str, tag: str) -> None:
    """An sdist (no wheel on the index) with an in-tree build backend: it builds offline."""
    root = directory / f"{name}-1.0"
    root.mkdir()
    (root / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    (root / "backend.py").write_text(BACKEND.format(name=name, tag=tag))
    (root / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    subprocess.run(["tar", "-czf", f"{name}-1.0.tar.gz", root.name], cwd=directory, check=True)
    shutil.rmtree(root)


def test_an_sdist_only_dependency_is_built_here_when_pure_python(tmp_path, index, fake_data,
                                                                 monkeypatch):
    links = Path(index[-1])
    make_wheel(links, "needspure", "1.0", ["puresdist"])
    make_sdist(links, "puresdist", "py3-none-any")
    manifest = bundle.build(tmp_path / "bundle", "smoke", ["trec"], [], part_size="1M", pythons=("3.11",),
                            requirements=["needspure==1.0"], index=index, data_root=fake_data,
                            log=lambda _line: None)
    assert {"wheels/needspure-1.0-py3-none-any.whl", "wheels/puresdist-1.0-py3-none-any.whl"} <= {
        f["path"] for f in manifest["files"]}
    # pinned at the top, as constraints.txt pins seqeval: pip calls it a conflict, not a missing
    # wheel (the bundle of 2026-11-25 failed so); a real conflict stays one error
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("puresdist==1.0\ntinypkg==1.0\ntinydep==1.1\n")
    monkeypatch.setattr(bundle, "REPO", tmp_path)
    manifest = bundle.build(tmp_path / "bundle-pinned", "smoke", ["trec"], [], part_size="1M",
                            pythons=("3.11",), requirements=["puresdist==1.0"], index=index,
                            data_root=fake_data, log=lambda _line: None)
    assert "wheels/puresdist-1.0-py3-none-any.whl" in {f["path"] for f in manifest["files"]}
    make_wheel(links, "tinydep", "2.0")
    with pytest.raises(bundle.BundleError, match=r"(?s)could not resolve.*Cannot install tinydep==2.0"):
        bundle.build(tmp_path / "bundle-conflict", "smoke", ["trec"], [], part_size="1M",
                     pythons=("3.11",), requirements=["tinypkg==1.0", "tinydep==2.0"], index=index,
                     data_root=fake_data, log=lambda _line: None)
    make_wheel(links, "needsnative", "1.0", ["nativesdist"])
    make_sdist(links, "nativesdist", "cp311-cp311-linux_x86_64")
    with pytest.raises(bundle.BundleError, match="nativesdist has no manylinux wheel .* not pure Python"):
        bundle.build(tmp_path / "bundle2", "smoke", ["trec"], [], part_size="1M", pythons=("3.11",),
                     requirements=["needsnative==1.0"], index=index, data_root=fake_data,
                     log=lambda _line: None)


def test_a_rebuild_replaces_an_earlier_bundle_but_never_other_files(tmp_path):
    out = tmp_path / "bundle"
    (out / ".build-abc").mkdir(parents=True)  # an interrupted build: parts, no manifest
    (out / "part-000").write_bytes(b"x")
    bundle._remake(out)
    assert out.is_dir() and list(out.iterdir()) == []
    (out / "notes.txt").write_text("mine")
    with pytest.raises(bundle.BundleError, match="not a bundle's"):
        bundle._remake(out)
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.network
def test_the_projects_own_requirements_resolve_for_a_node(tmp_path):
    """Against the package index (skipped offline): the wheels a real bundle needs resolve for the
    node's CPython 3.12, seqeval (an sdist only, pinned) built here, torch and what only torch
    needs left out. The gpu bundle of 2026-11-25 failed at exactly this step."""
    from test_colab_resolution import _index_reachable

    why = _index_reachable()
    if why:
        pytest.skip(f"package index unreachable: {why}")
    local = tmp_path / "built"
    local.mkdir()
    found = bundle.resolve(bundle.top_level_requirements(), "3.12", [], local, lambda _line: None)
    pins = bundle.constraints()
    for name in ("seqeval", "peft", "datasets", "pytorch-ignite", "transformers", "nbval"):
        assert found.get(name) == pins[name], name
    assert "torch" not in found and not any(n.startswith(("nvidia-", "triton")) for n in found)
    assert [p.name for p in local.glob("*.whl")] == [f"seqeval-{pins['seqeval']}-py3-none-any.whl"]
