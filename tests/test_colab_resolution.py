"""Installing tutorial_lib on Colab must replace none of Colab's preinstalled compiled packages.

Replacing them is what breaks notebook courses on Colab: pyarrow, numpy or pandas ABI errors until
the runtime is restarted ("restart your runtime"), or a multi-GB torch reinstall. The test builds a
throwaway virtual environment of Colab's Python (3.13) that *looks* like Colab's GPU runtime to pip:
for each package of Colab's own ``pip freeze`` (tests/colab/pip-freeze.gpu.txt, with its source
and date; ``scripts/refresh_colab_freeze.py`` refreshes it) only its metadata, no code. Then it
asks pip, against PyPI, what the notebooks' first cell would do there — ``pip install
"tutorial_lib @ <this project>" gguf accelerate`` (``--dry-run --report``, with dependencies) — and
fails if that replaces a preinstalled package with a compiled (platform-specific) wheel. Pure-Python
replacements are allowed and listed.

Skipped, with the reason, when the package index cannot be reached or no CPython 3.13 is found
(``pyenv versions`` lists one on the project's machines). pip's downloads (metadata only, mostly)
are cached in the system temp folder, so a second run takes seconds.
"""

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
FREEZE = REPO / "tests" / "colab" / "pip-freeze.gpu.txt"
INDEX_URL = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
CACHE = Path(tempfile.gettempdir()) / "tutorial_lib-colab-resolve-pip-cache"
COLAB_PYTHON = "3.13"
FIRST_CELL_EXTRAS = ("gguf", "accelerate")  # what the notebooks' first cell installs beside us


def colab_packages(path: Path = FREEZE) -> dict[str, str]:
    """Colab's preinstalled packages, name -> version (direct references left out: no version)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and "==" in line and " @ " not in line:
            name, version = line.split("==", 1)
            out[canonicalize_name(name)] = version.strip()
    return out


def _ssl_context() -> ssl.SSLContext:
    cert = os.environ.get("PIP_CERT")
    return ssl.create_default_context(cafile=cert) if cert else ssl.create_default_context()


def _index_reachable() -> str | None:
    """None if the package index answers, else why not."""
    try:
        with urllib.request.urlopen(f"{INDEX_URL.rstrip('/')}/pip/", timeout=15,
                                    context=_ssl_context()) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except OSError as err:  # URLError, timeouts, DNS
        return str(err)


def colab_python() -> str | None:
    """A CPython 3.13 here (Colab's Python), or None."""
    candidates = [*map(str, sorted(Path.home().glob(f".pyenv/versions/{COLAB_PYTHON}.*/bin/python3"))),
                  shutil.which(f"python{COLAB_PYTHON}")]
    for exe in candidates:
        if exe and subprocess.run([exe, "-c", "import venv"], capture_output=True).returncode == 0:
            return exe
    return None


def _metadata_requires(name: str, version: str) -> list[str] | None:
    """Requires-Dist of ``name==version`` from the index's core metadata (PEP 658: the simple
    API's file URL + ``.metadata``, what pip itself reads); None where it has none."""
    if "+" in version:  # a local build (torch 2.11.0+cu128, from PyTorch's index): not PyPI's
        return None
    base = version
    request = urllib.request.Request(f"{INDEX_URL.rstrip('/')}/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30, context=_ssl_context()) as response:
            files = json.load(response)["files"]
        wheels = [f["url"] for f in files if f["filename"].endswith(".whl")
                  and f["filename"].split("-")[1] == base.replace("-", "_")]
        if not wheels:
            return None
        with urllib.request.urlopen(wheels[0].split("#")[0] + ".metadata", timeout=30,
                                    context=_ssl_context()) as response:
            text = response.read().decode()
    except (OSError, ValueError, KeyError):
        return None
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def requires_dist(packages: dict[str, str], roots: Sequence[str]) -> dict[str, list[str]]:
    """Requires-Dist of the preinstalled packages an install of ``roots`` can reach (through
    preinstalled packages), from the index (cached in the temp folder). With them pip sees what
    Colab's packages need (transformers 5.15: huggingface-hub below 2), as on Colab, and cannot
    upgrade a dependency from under them."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cache = CACHE / "requires-dist.json"
    known = json.loads(cache.read_text()) if cache.exists() else {}
    found: dict[str, list[str]] = {}
    todo = {canonicalize_name(Requirement(r).name) for r in roots} & set(packages)
    with ThreadPoolExecutor(16) as pool:
        while todo:
            missing = [n for n in todo if f"{n}=={packages[n]}" not in known]
            for n, reqs in zip(missing, pool.map(lambda n: _metadata_requires(n, packages[n]), missing)):
                known[f"{n}=={packages[n]}"] = reqs
            nxt = set()
            for n in todo:
                found[n] = known[f"{n}=={packages[n]}"] or []
                for r in map(Requirement, found[n]):
                    dep = canonicalize_name(r.name)
                    if "extra" not in str(r.marker or "") and dep in packages and dep not in found:
                        nxt.add(dep)
            todo = nxt
    cache.write_text(json.dumps(known))
    return found


def _roots(pyproject: str) -> list[str]:
    """The first cell's install: the project's runtime dependencies and its extras."""
    block = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    return [*re.findall(r'"([^"]+)"', block), *FIRST_CELL_EXTRAS]


def fake_colab_env(root: Path, packages: dict[str, str], python: str,
                   requires: dict[str, list[str]] | None = None) -> Path:
    """A venv of ``python`` whose site-packages holds only the metadata of ``packages`` (with
    their ``requires``, when given)."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True)
    exe = root / "bin" / "python"
    purelib = subprocess.run([str(exe), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for name, version in packages.items():
        info = Path(purelib) / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        deps = "".join(f"Requires-Dist: {r}\n" for r in (requires or {}).get(name, []))
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{deps}")
        (info / "INSTALLER").write_text("pip\n")
        files = ("METADATA", "INSTALLER", "RECORD")
        (info / "RECORD").write_text("".join(f"{info.name}/{f},,\n" for f in files))
    return exe


def _project_copy(root: Path, pyproject: str | None = None) -> Path:
    """What pip needs to read this project's metadata: pyproject.toml, README, the package dirs."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(pyproject or (REPO / "pyproject.toml").read_text())
    shutil.copy(REPO / "README.md", root / "README.md")
    for init in (REPO / "tutorial_lib").rglob("__init__.py"):  # every package pyproject lists
        target = root / init.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(init, target)
    return root


def resolve_on_colab(tmp: Path, python: str, pyproject: str | None = None) -> dict[str, dict]:
    """name -> {version, wheel} of what the first cell's install would put into the fake Colab."""
    packages = colab_packages()
    roots = _roots(pyproject or (REPO / "pyproject.toml").read_text())
    env_python = fake_colab_env(tmp / "colab", packages, python, requires_dist(packages, roots))
    project = _project_copy(tmp / "project", pyproject)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no machine config: no local wheels, indexes or constraints
    report = tmp / "report.json"
    cmd = [sys.executable, "-m", "pip", "--python", str(env_python), "install", "--dry-run", "--quiet",
           "--report", str(report), "--index-url", INDEX_URL, "--cache-dir", str(CACHE),
           "--prefer-binary", "--disable-pip-version-check", "--timeout", "60"]
    if os.environ.get("PIP_CERT"):
        cmd += ["--cert", os.environ["PIP_CERT"]]
    proc = subprocess.run(cmd + [str(project), *FIRST_CELL_EXTRAS], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"pip could not resolve the install:\n{proc.stdout}\n{proc.stderr}"
    items = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): {
        "version": i["metadata"]["version"],
        "wheel": i.get("download_info", {}).get("url", "").rsplit("/", 1)[-1]} for i in items}


def changes(plan: dict[str, dict], preinstalled: dict[str, str]) -> tuple[dict, dict]:
    """(compiled, pure) preinstalled packages the plan would replace: name -> "old -> new". Pure:
    a ``py3-none-any`` wheel; anything else (a platform wheel, an sdist to build) is compiled."""
    compiled, pure = {}, {}
    for name, item in plan.items():
        if name in preinstalled:
            line = f"{preinstalled[name]} -> {item['version']}"
            wheel = item["wheel"]
            (pure if re.search(r"-none-any\.whl$", wheel) else compiled)[name] = line
    return compiled, pure


def _skip_reason() -> str | None:
    why = _index_reachable()
    if why:
        return f"package index {INDEX_URL} unreachable ({why}): cannot resolve against it"
    if colab_python() is None:
        return f"no CPython {COLAB_PYTHON} here (Colab's Python): pyenv install {COLAB_PYTHON}"
    return None


@pytest.fixture(scope="module")
def colab_plan(tmp_path_factory) -> dict[str, dict]:
    why = _skip_reason()
    if why:
        pytest.skip(why)
    return resolve_on_colab(tmp_path_factory.mktemp("colab"), colab_python())


def test_the_freeze_is_colabs_gpu_runtime_with_its_source_and_date():
    packages = colab_packages()
    head = FREEZE.read_text().splitlines()[:2]
    assert "googlecolab/backend-info" in head[0] and re.search(r"\b[0-9a-f]{40}\b \(\d{4}-\d\d-\d\d", head[1])
    assert packages["torch"].startswith("2.") and "pyarrow" in packages and "numpy" in packages
    assert len(packages) > 500


def test_the_fake_colab_is_what_pip_sees(tmp_path):
    python = colab_python()
    if python is None:
        pytest.skip(f"no CPython {COLAB_PYTHON} here")
    exe = fake_colab_env(tmp_path / "env", {"torch": "2.11.0+cu128", "numpy": "2.1.3"}, python)
    out = subprocess.run([str(exe), "-c", "import sys; from importlib.metadata import version as v; "
                          "import importlib.util as u; print(sys.version_info[:2] == (3, 13), "
                          "v('torch'), v('numpy'), u.find_spec('transformers'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "2.11.0+cu128", "2.1.3", "None"]  # nothing of this interpreter's


@pytest.mark.network
@pytest.mark.network_in_ci  # the one resolution CI runs (about 20 s of a worker)
def test_installing_the_package_on_colab_replaces_no_compiled_package(colab_plan):
    preinstalled = colab_packages()
    plan = ", ".join(f"{n}=={i['version']}" for n, i in sorted(colab_plan.items()))
    assert "tutorial-lib" in colab_plan, f"the project itself is not in the plan: {plan}"
    compiled, pure = changes(colab_plan, preinstalled)
    assert not compiled, (f"the first cell would replace Colab's compiled {compiled} (pure Python: "
                          f"{pure}); whole plan: {plan}")
    print(f"\non Colab's GPU runtime the first cell installs: {plan}; "
          f"replaces (pure Python): {pure or 'none'}")


@pytest.mark.network
def test_the_pyproject_of_886c792_replaced_colabs_pyarrow(tmp_path):
    """The test can fail: the ranges before this change (datasets>=5.0, peft>=0.21) pulled
    pyarrow 26 over Colab's 18.1, the compiled package that forces a runtime restart."""
    why = _skip_reason()
    if why:
        pytest.skip(why)
    old = (REPO / "pyproject.toml").read_text()
    old = re.sub(r'"datasets>=[^"]+"', '"datasets>=5.0,<6"', old)
    old = re.sub(r'"peft>=[^"]+"', '"peft>=0.21,<0.22"', old)
    compiled, _ = changes(resolve_on_colab(tmp_path, colab_python(), old), colab_packages())
    assert "pyarrow" in compiled, compiled
