#!/usr/bin/env bash
# The test command: set up .venv if needed, lint (ruff; actionlint on .github/workflows), then run
# the unit tests and execute every notebook at smoke scale with nbval, in one pytest run. Extra
# arguments go to pytest. TUTORIAL_DATA_DIR set but empty means no local copy: the Hub path (the
# GitHub CI, from a prefetched HF_HOME); unset, the project machines' copy ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export TUTORIAL_DATA_DIR=${TUTORIAL_DATA_DIR-$(cd .. && pwd)/shared/data}
export TUTORIAL_SCALE=smoke
export TUTORIAL_CACHE_DIR=${TUTORIAL_CACHE_DIR:-$(mktemp -d)}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MPLBACKEND=Agg
.venv/bin/ruff check .
.venv/bin/actionlint
.venv/bin/python -m pytest -q -W ignore::DeprecationWarning \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=600 \
  tests notebooks "$@"
