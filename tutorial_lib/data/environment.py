"""What the environment says about where data comes from.

``TUTORIAL_DATA_DIR`` names the local copy; ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` say
that the Hugging Face Hub must not be contacted. Nothing else is configurable.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..config import DATA_ENV_VAR  # the one configurable location of the local copy

DATA_DIR_PLACEHOLDER = f"${DATA_ENV_VAR}"
"""How user-facing strings name the local copy (never its absolute path)."""

OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_TRUE = {"1", "true", "yes", "on"}


def data_dir() -> Path | None:
    """The local copy named by ``TUTORIAL_DATA_DIR`` (``~`` expanded), or None if unset."""
    value = os.environ.get(DATA_ENV_VAR, "").strip()
    return Path(value).expanduser() if value else None


def offline_flag() -> str | None:
    """``"HF_HUB_OFFLINE=1"`` (the first offline variable that is on), or None when online."""
    for var in OFFLINE_ENV_VARS:
        value = os.environ.get(var, "").strip()
        if value.lower() in _TRUE:
            return f"{var}={value}"
    return None
