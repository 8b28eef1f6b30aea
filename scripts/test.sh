#!/usr/bin/env bash
# The test command: set up .venv if needed, lint (ruff; actionlint on .github/workflows), then
# scripts/pytest_all.sh (which scripts/gpu_runs.sh also runs on a GPU): the unit tests and every
# notebook at smoke scale under nbval on two workers, each notebook executed once; the notebooks
# save their results into a fresh TUTORIAL_RESULTS_DIR, and the last test (tests/test_results.py,
# marked after_notebooks) requires every notebook of the run to have saved them and builds the
# report from them. Extra arguments go to pytest. The data: see preflight below. The run itself is
# offline (HF_HUB_OFFLINE=1): every dataset comes from the local copy or the Hub's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE  # .pyc written once, read by every later process (scripts/pytest_all.sh)
# Before anything is installed: Python >= 3.11, and where the data comes from (scripts/data_source.py):
# TUTORIAL_DATA_DIR if set (empty: the Hub's cache a prefetch filled, as ci.yml does), else
# ../shared/data where it exists, else the Hub — prefetched here first when it can be reached,
# otherwise one clear error in seconds naming both remedies, and nothing written.
. scripts/preflight.sh
preflight smoke
bash scripts/setup_env.sh
fetch_if_needed
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
# The tests that ask the package index (marker network): the Colab resolution (the first cell's
# install on Colab's runtime, marked network_in_ci, about 20 s of a worker) runs here; the rest
# (another Colab resolution kept to show the test can fail, a bundle node's wheels: about 95 s of a
# worker) is left out unless SKIP_NETWORK is set and empty, which keeps the run under 540 s on the
# 2-core machine. The GitHub workflow (ci.yml) sets SKIP_NETWORK="" and runs them all.
export SKIP_NETWORK=${SKIP_NETWORK-1}
# the floors leg's venv (the package on the oldest versions it declares, Colab's) is built in the
# background while the main leg runs: the build is mostly downloading
floors_log=$(mktemp)
if [ $# -eq 0 ]; then bash scripts/test_floors.sh --build-only > "$floors_log" 2>&1 & floors=$!; fi
.venv/bin/ruff check .
.venv/bin/actionlint
bash scripts/pytest_all.sh "$@"
if [ $# -eq 0 ]; then  # the floors leg: about a minute once its venv is there
  wait "$floors" || { cat "$floors_log"; echo "building .venv-floors failed (above)" >&2; exit 1; }
  bash scripts/test_floors.sh
fi
