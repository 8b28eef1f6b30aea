#!/usr/bin/env bash
# The test command's pytest part, shared by scripts/test.sh (CI, after set-up and lint) and
# scripts/gpu_runs.sh (the same tests on a GPU machine, from a device kit):
#   1. every notebook at smoke scale under nbval, its worked solutions after its cells
#      (notebooks/conftest.py; TUTORIAL_SOLUTIONS=0 leaves them out), and the unit tests, on
#      pytest-xdist workers (TEST_WORKERS, default 2; --dist loadfile keeps a notebook's cells in
#      one kernel, in order; the notebooks, the longest files, first: the unit tests fill the end);
#   2. with no extra arguments (every notebook ran): the check that each saved its results and the
#      report built from them (tests/test_results.py, marked after_notebooks).
# PY: the interpreter (default .venv/bin/python). JUNIT_DIR: also write each call's JUnit XML there
# (per-test times: scripts/gpu_runs.sh sums them per notebook). SKIP_NETWORK=1: leave out the tests
# marked network but not network_in_ci (the Colab resolution runs anyway). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
# Bytecode: a machine that sets PYTHONDONTWRITEBYTECODE (this project's does) makes every process
# compile torch's, transformers' and datasets' sources again at import (7 s on the 2-core EPYC, 3.5 s
# from .pyc); a run starts about 40 Python processes (workers, notebook kernels, subprocess tests).
# Writing the .pyc once, into .venv and the git-ignored __pycache__/, is what Python does by default.
unset PYTHONDONTWRITEBYTECODE
export TUTORIAL_SCALE=smoke
# every notebook's worked solutions run after its cells, at smoke (notebooks/conftest.py)
export TUTORIAL_SOLUTIONS=${TUTORIAL_SOLUTIONS:-1}
export TUTORIAL_CACHE_DIR=${TUTORIAL_CACHE_DIR:-$(mktemp -d)}
TUTORIAL_RESULTS_DIR=$(mktemp -d)  # this run's results only: none left over from another
export TUTORIAL_RESULTS_DIR
trap 'rm -rf "$TUTORIAL_RESULTS_DIR"' EXIT
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MPLBACKEND=Agg
# One torch thread per worker: the 2-core machine runs two tests at once instead of one test on
# two threads (most tests are too small for two threads to help).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
workers=${TEST_WORKERS:-2}
junit() { [ -n "${JUNIT_DIR:-}" ] && echo "--junitxml=$JUNIT_DIR/$1.xml"; true; }
TUTORIAL_NOTEBOOKS_RAN_SINCE=$(date +%s)
"$PY" -m pytest -q -W ignore::DeprecationWarning -n "$workers" --dist loadfile \
  -m "not after_notebooks${SKIP_NETWORK:+ and (not network or network_in_ci)}" $(junit tests-and-notebooks) \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=600 \
  notebooks tests "$@"
if [ $# -eq 0 ]; then  # every notebook ran: check that each saved its results, build the report
  TUTORIAL_NOTEBOOKS_RAN_SINCE=$TUTORIAL_NOTEBOOKS_RAN_SINCE "$PY" -m pytest -q \
    -W ignore::DeprecationWarning -m after_notebooks $(junit after-notebooks) tests/test_results.py
fi
