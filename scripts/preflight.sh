# Sourced by scripts/test.sh and scripts/main_job.sh before anything is installed or written:
#   preflight SCALE   checks the interpreter (Python >= 3.11) and decides where the datasets come
#                     from (scripts/data_source.py: a local copy, the Hub's cache, or a prefetch from
#                     the Hub first); on failure, one clear error and exit status 2, nothing written.
#   fetch_if_needed   after scripts/setup_env.sh: runs the prefetch when that was the decision.
preflight() {
  PY=${PYTHON:-python3}
  if ! command -v "$PY" > /dev/null; then
    echo "error: no Python interpreter '$PY' found: install Python >= 3.11 (or set PYTHON=/path/to/python3.11)" >&2
    exit 2
  fi
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2> /dev/null; then
    echo "error: this project needs Python >= 3.11; '$PY' is $("$PY" --version 2>&1). Install 3.11 or newer and run again with PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  PREFLIGHT_SCALE=$1
  local decision
  decision=$("$PY" scripts/data_source.py --scale "$PREFLIGHT_SCALE") || exit 2
  eval "$decision"
  echo "data: $DATA_SOURCE_WHY"
}

fetch_if_needed() {
  if [ "$DATA_SOURCE" = prefetch ]; then
    .venv/bin/python -m tutorial_lib.ops.prefetch --scale "$PREFLIGHT_SCALE"
    "$PY" scripts/data_source.py --scale "$PREFLIGHT_SCALE" --mark
  fi
}
