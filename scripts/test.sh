#!/usr/bin/env bash
# The test command: set up .venv if needed, lint (ruff; actionlint on .github/workflows), then run
# the unit tests and execute every notebook at smoke scale with nbval (two workers): each
# notebook is executed once. The notebooks save their results into a fresh TUTORIAL_RESULTS_DIR,
# and the last test (tests/test_results.py, marked after_notebooks) requires every notebook of the
# run to have saved them and builds the report from them. Extra arguments go to pytest. TUTORIAL_DATA_DIR set but empty means no local copy: the Hub path (the
# GitHub CI, from a prefetched HF_HOME); unset, the project machines' copy ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# The local data copy: ../shared/data by default, but only where it exists and only when
# TUTORIAL_DATA_DIR is unset (set to an empty string, it means the Hub: ci.yml does that).
# Otherwise, as this run is offline, the tests that need the data are skipped and the notebooks
# stop with tutorial_lib.data's "offline, no local copy" error.
if [ -z "${TUTORIAL_DATA_DIR+x}" ] && [ -d ../shared/data ]; then
  export TUTORIAL_DATA_DIR=$(cd ../shared/data && pwd)
fi
export TUTORIAL_SCALE=smoke
export TUTORIAL_CACHE_DIR=${TUTORIAL_CACHE_DIR:-$(mktemp -d)}
TUTORIAL_RESULTS_DIR=$(mktemp -d)  # this run's results only: none left over from another
export TUTORIAL_RESULTS_DIR
trap 'rm -rf "$TUTORIAL_RESULTS_DIR"' EXIT
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MPLBACKEND=Agg
.venv/bin/ruff check .
.venv/bin/actionlint
# Two worker processes (pytest-xdist; TEST_WORKERS overrides, 0 = none), one torch thread each:
# the 2-core machine runs two tests at once instead of one test on two threads (most tests are
# too small for two threads to help). --dist loadfile keeps every notebook's cells on one worker,
# in order, in one kernel. The check of what the notebooks saved (marked after_notebooks) runs
# after all of them, as a second pytest call on the same results folder.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
workers=${TEST_WORKERS:-2}
TUTORIAL_NOTEBOOKS_RAN_SINCE=$(date +%s)
.venv/bin/python -m pytest -q -W ignore::DeprecationWarning -n "$workers" --dist loadfile \
  -m "not after_notebooks" \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=600 \
  tests notebooks "$@"
if [ $# -eq 0 ]; then  # every notebook ran: check that each saved its results, build the report
  TUTORIAL_NOTEBOOKS_RAN_SINCE=$TUTORIAL_NOTEBOOKS_RAN_SINCE .venv/bin/python -m pytest -q \
    -W ignore::DeprecationWarning -m after_notebooks tests/test_results.py
fi
