"""Loading a ``scripts/*.py`` file as a module in a test (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str, alias: str | None = None) -> ModuleType:
    """``scripts/<name>.py`` as a module named ``alias`` (default ``<name>_under_test``),
    registered in ``sys.modules`` so that dataclasses and pickling can find it."""
    alias = alias or f"{name}_under_test"
    spec = importlib.util.spec_from_file_location(alias, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module
