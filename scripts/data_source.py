"""Where the datasets come from for a run of the test command or the main job — decided before
anything is installed, with the standard library only, so that a machine that cannot run the
project learns it in seconds and nothing is written.

    python3 scripts/data_source.py --scale smoke            # prints shell assignments, or one error
    python3 scripts/data_source.py --scale smoke --mark     # after a prefetch: remember it (stamp)

The rule (:func:`decide`), in order:

1. ``TUTORIAL_DATA_DIR`` set to a path: that local copy (it must exist), offline.
2. ``TUTORIAL_DATA_DIR`` set but empty: the Hub path through a cache the caller filled (the
   GitHub workflows run ``python -m tutorial_lib.ops.prefetch`` in a step of their own), offline.
3. unset, with ``../shared/data`` beside the checkout (the project's machines): that copy, offline.
4. unset, no copy, but a prefetch of this scale finished before (its stamp in ``HF_HOME``): the
   Hub's cache, offline.
5. unset, no copy, the Hub reachable: **prefetch first** (the caller runs
   ``python -m tutorial_lib.ops.prefetch --scale <scale>`` once the venv exists), then offline.
6. otherwise: one error naming both remedies, exit status 2.

The Hub counts as unreachable when ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` is on or a TCP
connection to ``HF_ENDPOINT`` (default https://huggingface.co) fails within a few seconds.
Printed lines are ``KEY=value`` assignments for ``eval`` in bash: ``DATA_SOURCE`` (local, cache or
prefetch), ``TUTORIAL_DATA_DIR`` (exported), and ``DATA_SOURCE_WHY``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
SHARED_COPY = ROOT.parent / "shared" / "data"
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
STAMP = "tutorial_lib-prefetched-{scale}"


class NoData(RuntimeError):
    """No way to the datasets: the message says both remedies."""


@dataclass(frozen=True)
class Decision:
    source: str  # "local", "cache" or "prefetch"
    data_dir: str  # the value TUTORIAL_DATA_DIR takes ("" = the Hub path)
    why: str

    def shell(self) -> str:
        return "\n".join(f"{k}={shlex.quote(v)}" for k, v in (
            ("DATA_SOURCE", self.source), ("TUTORIAL_DATA_DIR", self.data_dir),
            ("DATA_SOURCE_WHY", self.why))) + "\nexport TUTORIAL_DATA_DIR\n"


def hf_home(env: Mapping[str, str]) -> Path:
    """huggingface_hub's cache root, as it computes it (``HF_HOME``, else XDG's cache)."""
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg) / "huggingface"


def stamp_path(env: Mapping[str, str], scale: str) -> Path:
    return hf_home(env) / STAMP.format(scale=scale)


def offline_by_flag(env: Mapping[str, str]) -> str | None:
    """The first offline variable that is on (``"HF_HUB_OFFLINE=1"``), or None."""
    for var in OFFLINE_VARS:
        if env.get(var, "").strip().lower() in {"1", "true", "yes", "on"}:
            return f"{var}={env[var]}"
    return None


def hub_reachable(env: Mapping[str, str], timeout: float = 5.0) -> bool:
    """A TCP connection to the Hub's endpoint opens within ``timeout`` seconds."""
    url = urlsplit(env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def decide(env: Mapping[str, str], scale: str, shared_copy: Path = SHARED_COPY,
           reachable: Callable[[], bool] = lambda: False) -> Decision:
    """The rule of the module docstring; raises :class:`NoData` when nothing can provide data."""
    given = env.get("TUTORIAL_DATA_DIR")
    if given is not None and given.strip():
        path = Path(given.strip()).expanduser()
        if not path.is_dir():
            raise NoData(f"TUTORIAL_DATA_DIR={given} is not a folder. Point it at a local copy of "
                         "the datasets, or unset it to use the Hugging Face Hub.")
        return Decision("local", str(path), f"the local copy TUTORIAL_DATA_DIR={path}")
    if given is not None:
        return Decision("cache", "", "TUTORIAL_DATA_DIR is empty: the Hub path, from the cache "
                        "a prefetch filled (HF_HOME)")
    if shared_copy.is_dir():
        return Decision("local", str(shared_copy.resolve()), f"the local copy {shared_copy}")
    if stamp_path(env, scale).exists():
        return Decision("cache", "", f"no local copy; the {scale} prefetch's cache in "
                        f"{hf_home(env)}")
    flag = offline_by_flag(env)
    if flag is None and reachable():
        return Decision("prefetch", "", f"no local copy: fetching what the {scale} scale needs "
                        "from the Hugging Face Hub first")
    reason = f"{flag} is set" if flag else "the Hugging Face Hub cannot be reached"
    raise NoData(
        f"no data: there is no local copy of the datasets ({shared_copy} does not exist and "
        f"TUTORIAL_DATA_DIR is unset) and {reason}. Either\n"
        f"  1. point TUTORIAL_DATA_DIR at a local copy of the datasets (the project's data "
        f"folder, or the data of an offline bundle), or\n"
        f"  2. run once with a connection to the Hub: this command then downloads what the "
        f"{scale} scale needs (python -m tutorial_lib.ops.prefetch --scale {scale}).")


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="smoke")
    parser.add_argument("--mark", action="store_true",
                        help="write the stamp that a prefetch of this scale finished")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.mark:
        path = stamp_path(env, args.scale)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("prefetched by scripts/test.sh or scripts/main_job.sh\n")
        return 0
    try:
        decision = decide(env, args.scale, reachable=lambda: hub_reachable(env))
    except NoData as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(decision.shell(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
