#!/usr/bin/env bash
# The GPU runs, in one command that a device call (or any CUDA machine) repeats until all is done:
#
#   bash scripts/gpu_runs.sh [--tests] [--throughput "eager compile"] [--notebooks "01 02"] [--minutes N]
#
# On the borrowed GPU machine it runs inside scripts/device_run.sh, from a device kit, without a
# network and without installing anything (docs/gpu.md has the calls); on any other CUDA machine,
# in this repository's environment (scripts/setup_env.sh with the node's CUDA torch).
#   0. refuses without a CUDA device: nothing here is ever simulated on a CPU;
#   1. --tests: the test command's pytest part (scripts/pytest_all.sh: the unit tests and every
#      notebook at smoke under nbval, then the after-notebooks check) with CUDA (the unit tests
#      too: TUTORIAL_TEST_DEVICE=cuda unless set, tests/conftest.py), on TEST_WORKERS
#      workers (default: the cores less two); pass/fail and seconds per notebook and for the unit
#      tests into results/gpu/smoke_tests.json (scripts/gpu_summary.py);
#   2. --throughput MODES ("eager", "compile" or both): pretraining throughput (benchmarks.throughput,
#      pretraining only) at the gpu and paper sizes, MFU against the bf16 matmul peak measured in
#      the same process (square matmuls up to 8192³), into results/gpu/throughput/;
#   3. --notebooks "01 02 …": those notebooks at the gpu scale (scripts/run_notebooks.py --resume
#      --start-within): wall time and peak GPU memory (reserved, allocated, CUDA context) of each
#      into results/gpu/, beside the executed copies, RESULTS.md and effects.json;
#   4. the summary (per notebook: wall time, peak memory, fits a 15 GiB T4); with $OUT set (a device
#      call), results/gpu packed into $OUT/results-gpu.tar.gz and this run's log beside it.
# --minutes N: the command's budget. No step or notebook starts after N - 1 minutes, and a running
# notebook is stopped 40 s before N minutes (SIGTERM: its cell interrupted, the notebook's earlier
# results kept), so that what ran comes back. Default 120.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=120 tests=0 throughput="" notebooks=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --tests) tests=1; shift ;;
    --throughput) throughput=$2; shift 2 ;;
    --notebooks) notebooks=$2; shift 2 ;;
    *) echo "usage: bash scripts/gpu_runs.sh [--tests] [--throughput \"eager compile\"]" \
            "[--notebooks \"01 02\"] [--minutes N]" >&2
       exit 2 ;;
  esac
done
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PY
out=${GPU_RUNS_OUT:-results/gpu}
began=$(date +%s)
left() { echo $(( began + minutes * 60 - $(date +%s) )); }  # seconds of the budget left
step() { echo; echo "=== $* ($(( $(date +%s) - began )) s in, $(left) s left)"; }
status=0

# 0. the GPU, or nothing
"$PY" -c 'import sys, torch; torch.cuda.is_available() or sys.exit(
    "gpu_runs.sh: no CUDA device is visible to torch " + torch.__version__ + ": these runs measure "
    "a GPU and are never simulated. Run them on a machine with one, or use the classroom scale: "
    "bash scripts/main_job.sh")'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
mkdir -p "$out"

# 1. the test command on the GPU
if [ "$tests" = 1 ] && [ "$(left)" -gt 60 ]; then
  step "tests: unit tests + every notebook at smoke under nbval, on CUDA"
  junit=$(mktemp -d)
  t0=$(date +%s)
  TUTORIAL_TEST_DEVICE=${TUTORIAL_TEST_DEVICE:-cuda} JUNIT_DIR=$junit \
    TEST_WORKERS=${TEST_WORKERS:-$(( $(nproc) - 2 ))} \
    timeout --signal=TERM $(( $(left) - 40 )) bash scripts/pytest_all.sh || status=$?
  "$PY" scripts/gpu_summary.py smoke "$junit" "$out/smoke_tests.json" \
    --seconds $(( $(date +%s) - t0 )) --exit-status "$status" || status=1
fi

# 2. pretraining throughput and MFU
for mode in $throughput; do
  for size in gpu paper; do
    need=80; [ "$mode" = compile ] && need=200  # compiling three models takes minutes
    if [ "$(left)" -lt $need ]; then echo "throughput $size $mode: not started, budget spent"; continue; fi
    step "throughput: $size, $mode"
    flag=""; [ "$mode" = compile ] && flag=--compile
    timeout --signal=TERM $(( $(left) - 40 )) "$PY" -m benchmarks.throughput --size "$size" \
      --device cuda --no-finetune $flag --out "$out/throughput" \
      || { echo "throughput $size $mode FAILED (the rest goes on)"; status=1; }
  done
done

# 3. the notebooks at the gpu scale
if [ -n "$notebooks" ] && [ "$(left)" -gt 100 ]; then
  step "notebooks $notebooks at the gpu scale"
  TUTORIAL_SCALE=gpu timeout --signal=TERM $(( $(left) - 40 )) "$PY" scripts/run_notebooks.py \
    --scale gpu --out "$out" --resume --start-within $(( minutes - 1 - ($(date +%s) - began) / 60 )) \
    --only $notebooks || status=$?
fi

# 4. the summary, and what comes back
step "summary"
"$PY" -c 'import sys; from tutorial_lib.ops import report; print(report.memory_table(sys.argv[1]))' \
  "$out" || true
if [ -n "${OUT:-}" ]; then
  tar -czf "$OUT/results-gpu.tar.gz" --exclude='.staging' "$out"
  ls -la "$OUT"
fi
exit $status
