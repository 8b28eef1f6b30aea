#!/usr/bin/env bash
# The gpu scale's runs on one CUDA GPU, in one command that can be repeated until all is done:
#
#   bash scripts/gpu_runs.sh [--minutes N] [--only "01 02 03 05"] [--no-throughput]
#
# Needs this repository's environment (scripts/setup_env.sh online, scripts/install_bundle.sh on
# a node without internet) with the node's CUDA build of torch, and the data (TUTORIAL_DATA_DIR).
#   1. refuses to run without a CUDA device: nothing here is ever simulated on a CPU;
#   2. results/gpu/machine.json: the GPU, its driver and memory, torch and CUDA versions;
#   3. pretraining throughput and MFU (benchmarks.throughput, pretraining only) at the gpu and
#      paper sizes, eager and torch.compile, into results/gpu/throughput/ (skipped when there);
#   4. the notebooks in the arc's order at the gpu scale (scripts/run_notebooks.py --scale gpu
#      --resume --start-within): each one's wall time and peak GPU memory (reserved, allocated,
#      CUDA context) go to results/gpu/, beside the executed copies, RESULTS.md and effects.json;
#      a second call goes on where the first stopped;
#   5. a summary, printed last: per notebook its wall time, peak memory and whether it fits a
#      15 GiB T4 (tutorial_lib.results.fits_t4).
# --minutes N: start nothing after N minutes (default 120); --only: those notebooks.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=120 only="" throughput=1
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-throughput) throughput=0; shift ;;
    *) echo "usage: bash scripts/gpu_runs.sh [--minutes N] [--only \"01 02\"] [--no-throughput]" >&2
       exit 2 ;;
  esac
done
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
out=${GPU_RUNS_OUT:-results/gpu}
export TUTORIAL_SCALE=gpu TOKENIZERS_PARALLELISM=false TUTORIAL_PROGRESS=0
if [ -z "${TUTORIAL_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  TUTORIAL_DATA_DIR=$(cd ../shared/data && pwd)
  export TUTORIAL_DATA_DIR
fi

# 1-2. the GPU, or nothing
"$PY" - "$out/machine.json" <<'EOF'
import json, subprocess, sys
import torch
if not torch.cuda.is_available():
    sys.exit("gpu_runs.sh: no CUDA device is visible to torch " + torch.__version__ + ": these runs "
             "measure a GPU and are never simulated. Run them on a machine with one (and its CUDA "
             "build of torch), or use the classroom scale: bash scripts/main_job.sh")
from pathlib import Path
Path(sys.argv[1]).parent.mkdir(parents=True, exist_ok=True)
props = torch.cuda.get_device_properties(0)
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                      "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
machine = {"gpu": torch.cuda.get_device_name(0), "nvidia_smi": smi,
           "compute_capability": list(torch.cuda.get_device_capability(0)),
           "memory_gib": round(props.total_memory / 2**30, 2), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
json.dump(machine, open(sys.argv[1], "w"), indent=1)
print(json.dumps(machine))
EOF

# 3. pretraining throughput and MFU
if [ "$throughput" = 1 ]; then
  for size in gpu paper; do
    for compile in "" --compile; do
      stem="$out/throughput/*-$size${compile:+-compile}.json"
      if compgen -G "$stem" > /dev/null; then echo "throughput $size $compile: done before"; continue; fi
      "$PY" -m benchmarks.throughput --size "$size" --device cuda --no-finetune $compile \
        --out "$out/throughput" || echo "throughput $size $compile FAILED (the notebooks go on)"
    done
  done
fi

# 4. the notebooks
args=(--scale gpu --out "$out" --resume --start-within "$minutes")
[ -n "$only" ] && args+=(--only $only)
status=0
"$PY" scripts/run_notebooks.py "${args[@]}" || status=$?

# 5. the summary
echo
"$PY" -c 'import sys; from tutorial_lib import results; print(results.memory_table(sys.argv[1]))' "$out"
exit $status
