#!/usr/bin/env bash
# On the borrowed GPU machine (no network, its image's Python 3.12 with CUDA torch): install a
# device kit over that Python and run a command with everything set up. Nothing here installs
# torch, creates a venv or needs a network. docs/gpu.md has the calls for each GPU issue.
#
#   bash scripts/device_run.sh KIT -- COMMAND ...     # KIT: a folder scripts/device_kit.py built
#
#   1. verifies the kit (every file's size and sha256 against kit.json) and pip-installs its
#      wheels offline, --no-deps, into $DEVICE_SITE (default: a new temporary folder), first on
#      PYTHONPATH with this checkout (tutorial_lib importable, the notebooks' kernels inherit it);
#   2. unpacks its data into .device/data (TUTORIAL_DATA_DIR) and its converted model
#      configurations into .device/cache (TUTORIAL_CACHE_DIR; both kept between calls on a warm
#      machine, so 01's pretrained models serve a second call);
#   3. sets the Hub offline (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, TRANSFORMERS_OFFLINE), Agg plots,
#      no progress bars;
#   4. writes the machine record (GPU, driver, CUDA, torch, the version of every package importable,
#      the pyproject ranges the image misses, the kit and its install time) to
#      $GPU_RUNS_OUT/machine.json (default results/gpu) and, when $OUT is set, $OUT/machine.json;
#   5. runs COMMAND; its exit status is this script's.
# A bad or missing kit is one error before anything is installed. PY overrides the interpreter
# (default python3: the image's); the offline dry run (docs/gpu.md) sets it to a stand-in venv.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || { [ $# -gt 1 ] && [ "$2" != "--" ]; }; then
  echo "usage: bash scripts/device_run.sh KIT [-- COMMAND ...]" >&2
  exit 2
fi
kit=$1; shift
[ "${1:-}" = "--" ] && shift
PY=${PY:-python3}
repo=$(pwd)
site=${DEVICE_SITE:-$(mktemp -d -t device-site.XXXXXX)}
start=$(date +%s.%N)
# the notebooks' kernels talk to nbval over loopback: bring it up where it is down (a fresh
# network namespace, as in the offline dry run)
"$PY" -c 'import socket; s = socket.create_server(("127.0.0.1", 0))
socket.create_connection(s.getsockname(), timeout=2).close()' 2>/dev/null \
  || ip link set lo up || { echo "device_run.sh: loopback is down and could not be brought up" \
  "(ip link set lo up, as root): the notebook kernels need it" >&2; exit 1; }
mkdir -p .device
"$PY" scripts/device_kit.py install "$kit" --site "$site" --data .device/data --cache .device/cache \
  > .device/install.json
export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
export TUTORIAL_DATA_DIR=$repo/.device/data TUTORIAL_CACHE_DIR=$repo/.device/cache
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export MPLBACKEND=Agg TOKENIZERS_PARALLELISM=false TUTORIAL_PROGRESS=0 PYTHONUNBUFFERED=1
installed=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" \
  "$start" "$(date +%s.%N)" 2>/dev/null || echo "?")
echo "device kit $kit installed in ${installed} s: $(cat .device/install.json)"
"$PY" - "$kit" "$installed" <<'EOF'
import json, os, shutil, sys
sys.path.insert(0, "scripts")
import device_kit
info = json.load(open(".device/install.json"))
info["wall_seconds"] = sys.argv[2]
path = os.path.join(os.environ.get("GPU_RUNS_OUT") or "results/gpu", "machine.json")
record = device_kit.machine(path, sys.argv[1], info)
if os.environ.get("OUT"):
    shutil.copy(path, os.path.join(os.environ["OUT"], "machine.json"))
print(json.dumps({k: v for k, v in record.items() if k != "packages"}))
EOF
[ $# -eq 0 ] && exit 0
exec "$@"
