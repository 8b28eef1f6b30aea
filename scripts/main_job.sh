#!/usr/bin/env bash
# The main job: set up .venv if needed, then execute every notebook in order at one scale
# (default classroom), saving the executed notebooks and the report results/<scale>/RESULTS.md
# (with its figures); a notebook that fails is reported there and the job exits 1 at the end.
#   bash scripts/main_job.sh                 # classroom scale, notebooks executed in place
#   bash scripts/main_job.sh --scale smoke   # any scale; see scripts/run_notebooks.py --help
#   bash scripts/main_job.sh --resume        # after an interruption: skip the notebooks whose
#                                            # results are newer than all they depend on
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# The local data copy: ../shared/data by default, but only where it exists; otherwise
# TUTORIAL_DATA_DIR stays unset and tutorial_lib.data loads from the Hugging Face Hub.
if [ -z "${TUTORIAL_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  export TUTORIAL_DATA_DIR=$(cd ../shared/data && pwd)
fi
export TOKENIZERS_PARALLELISM=false TUTORIAL_PROGRESS=0  # no MPLBACKEND: the inline backend must save figures
.venv/bin/python scripts/run_notebooks.py "$@"
