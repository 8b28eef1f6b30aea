#!/usr/bin/env bash
# The main job: set up .venv if needed, then execute every notebook in order at one scale
# (default classroom), saving the executed notebooks and the report results/<scale>/RESULTS.md
# (it says where each figure lies in them); a notebook that fails is reported there and the job exits 1 at the end.
#   bash scripts/main_job.sh                 # classroom scale, notebooks executed in place
#   bash scripts/main_job.sh --scale smoke   # any scale; see scripts/run_notebooks.py --help
#   bash scripts/main_job.sh --resume        # after an interruption: skip the notebooks whose
#                                            # results are newer than all they depend on
set -euo pipefail
cd "$(dirname "$0")/.."
scale=classroom  # the scale the arguments ask for (run_notebooks.py's default)
prev=
for arg in "$@"; do
  case "$arg" in --scale=*) scale=${arg#--scale=} ;; esac
  [ "$prev" = --scale ] && scale=$arg
  prev=$arg
done
# Before anything is installed: Python >= 3.11 and where the data comes from (scripts/preflight.sh:
# the local copy ../shared/data or TUTORIAL_DATA_DIR, else the Hub, prefetched first when reachable).
. scripts/preflight.sh
preflight "$scale"
bash scripts/setup_env.sh
fetch_if_needed
[ -n "$TUTORIAL_DATA_DIR" ] || unset TUTORIAL_DATA_DIR  # the Hub path (tutorial_lib.data)
export TOKENIZERS_PARALLELISM=false TUTORIAL_PROGRESS=0  # no MPLBACKEND: the inline backend must save figures
.venv/bin/python scripts/run_notebooks.py "$@"
