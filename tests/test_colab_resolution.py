"""Installing tutorial_lib on Colab must not replace Colab's torch, numpy or pandas.

Replacing them is what breaks notebook courses on Colab: numpy/pandas ABI errors until the kernel
is restarted, or a multi-GB torch reinstall. The test builds a throwaway virtual environment that
*looks* like a Colab runtime to pip: for each preinstalled package only its metadata (a
``.dist-info`` folder with METADATA, RECORD and INSTALLER; no code). Then it asks pip, against
PyPI, what ``pip install <this project>`` would do there (``--dry-run --report``, with
dependencies, as the Colab cell runs it) and fails if the install list has torch, numpy or pandas.

The Colab runtime modelled (versions of late 2025, the oldest a course should expect) is
:data:`COLAB_PREINSTALLED`; the interpreter is the one running the tests (Colab has 3.12). Skipped,
with the reason, when the package index cannot be reached. pip's downloads (metadata only, mostly)
are cached in the system temp folder, so a second run takes seconds.
"""

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request
import venv
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
INDEX_URL = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
CACHE = Path(tempfile.gettempdir()) / "tutorial_lib-colab-resolve-pip-cache"

COLAB_PREINSTALLED = {
    "torch": "2.8.0",
    "numpy": "2.0.2",
    "pandas": "2.2.2",
    "matplotlib": "3.10.0",
    "scipy": "1.16.1",
    "scikit-learn": "1.6.1",
    "pyarrow": "18.1.0",
    "threadpoolctl": "3.6.0",
    "tabulate": "0.9.0",
}
MUST_STAY = ("torch", "numpy", "pandas")


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


def _fake_colab_env(root: Path) -> Path:
    """A venv whose site-packages holds only the metadata of :data:`COLAB_PREINSTALLED`."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for name, version in COLAB_PREINSTALLED.items():
        info = Path(purelib) / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("pip\n")
        files = ("METADATA", "INSTALLER", "RECORD")
        (info / "RECORD").write_text("".join(f"{info.name}/{f},,\n" for f in files))
    return python


def _project_copy(root: Path) -> Path:
    """What pip needs to read this project's metadata: pyproject.toml, README, the package dir."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(REPO / "README.md", root / "README.md")
    for init in (REPO / "tutorial_lib").rglob("__init__.py"):  # every package pyproject lists
        target = root / init.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(init, target)
    return root


def resolve_on_colab(tmp: Path) -> dict[str, str]:
    """name -> version of what ``pip install <project>`` would install into the fake Colab."""
    python = _fake_colab_env(tmp / "colab")
    project = _project_copy(tmp / "project")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no machine config: no local wheels, indexes or constraints
    report = tmp / "report.json"
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
           "--report", str(report), "--index-url", INDEX_URL, "--cache-dir", str(CACHE),
           "--prefer-binary", "--disable-pip-version-check", "--timeout", "60"]
    if os.environ.get("PIP_CERT"):
        cmd += ["--cert", os.environ["PIP_CERT"]]
    proc = subprocess.run(cmd + [str(project)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"pip could not resolve the install:\n{proc.stdout}\n{proc.stderr}"
    items = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in items}


@pytest.fixture(scope="module")
def colab_install(tmp_path_factory) -> dict[str, str]:
    why = _index_reachable()
    if why:
        pytest.skip(f"package index {INDEX_URL} unreachable ({why}): cannot resolve against it")
    return resolve_on_colab(tmp_path_factory.mktemp("colab"))


def test_the_fake_colab_is_what_pip_sees(tmp_path):
    python = _fake_colab_env(tmp_path / "env")
    out = subprocess.run([str(python), "-c", "from importlib.metadata import version as v; "
                          "import importlib.util as u; "
                          "print(v('torch'), v('numpy'), v('pandas'), u.find_spec('transformers'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    # the preinstalled versions, and nothing from this interpreter's packages (transformers)
    assert out == [*(COLAB_PREINSTALLED[n] for n in MUST_STAY), "None"]


def test_installing_the_package_on_colab_keeps_torch_numpy_and_pandas(colab_install):
    plan = ", ".join(f"{n}=={v}" for n, v in sorted(colab_install.items()))
    assert "tutorial-lib" in colab_install, f"the project itself is not in the plan: {plan}"
    replaced = {n: f"{COLAB_PREINSTALLED[n]} -> {colab_install[n]}" for n in MUST_STAY if n in colab_install}
    assert not replaced, f"pip would replace Colab's {replaced}; whole plan: {plan}"
    print(f"\npip would install on the modelled Colab: {plan}")
