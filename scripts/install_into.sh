#!/usr/bin/env bash
# Sourced by scripts/setup_env.sh and scripts/test_floors.sh: install_into VENV ARGS... installs
# ARGS (pip's install arguments: -c, -r, -e, --no-deps, --require-hashes, --index-url) into the virtual environment VENV
# with uv, pinned in constraints.txt, which installs the same versions as pip about four times
# faster (measured 2026-11-28 on the 2-core machine, a fresh .venv: 13 s against pip's 54 s, the
# same `pip freeze`). uv does not read pip's configuration, so pip's find-links folders and
# constraint files (`pip config`, $PIP_FIND_LINKS, $PIP_CONSTRAINT) that exist are passed on;
# the constraint files not with --require-hashes (setup_env.sh's hashed lock, requirements.lock):
# there uv refuses any constraint that is not an exact pin (this machine's `torch<=2.14.1`), and
# every version is exact already.
# Where uv cannot be installed or fails, pip does the install, as before.
install_into() {
  local venv=$1; shift
  local py="$venv/bin/python"
  if [ ! -x "$venv/bin/uv" ]; then
    "$py" -m pip install -q --disable-pip-version-check --no-compile \
      "$(grep -E '^uv==' "${INSTALL_CONSTRAINTS:-constraints.txt}")" > /dev/null 2>&1 || true
  fi
  if [ -x "$venv/bin/uv" ]; then
    local from_pip=() path arg hashed=0
    for arg in "$@"; do
      if [ "$arg" = --require-hashes ]; then hashed=1; fi
    done
    for path in $(
      { "$py" -m pip config get global.find-links 2>/dev/null; echo "${PIP_FIND_LINKS:-}"; } | tr ' ' '\n'
    ); do
      if [ -d "$path" ]; then from_pip+=(--find-links "$path"); fi
    done
    for path in $(
      { "$py" -m pip config get global.constraint 2>/dev/null; echo "${PIP_CONSTRAINT:-}"; } | tr ' ' '\n'
    ); do
      if [ -f "$path" ] && [ "$hashed" = 0 ]; then from_pip+=(-c "$path"); fi
    done
    if "$venv/bin/uv" pip install -q --python "$py" "${from_pip[@]}" "$@"; then
      return 0
    fi
    echo "uv could not install $* into $venv: installing with pip" >&2
  fi
  "$py" -m pip install -q --disable-pip-version-check --no-compile "$@"
}
