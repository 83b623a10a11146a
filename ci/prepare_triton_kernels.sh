#!/usr/bin/env bash
# Export OpenAI's triton_kernels (python/triton_kernels/triton_kernels of the Triton repository; not on PyPI,
# the PyPI "triton-kernels" is unrelated) at a ref into the git-ignored .peers/triton_kernels, for the
# triton-ogs-bf16-mxfp4 baseline. The GPU machine has no network: carry .peers and set
# PYTHONPATH=$PWD/.peers there (docs/PEERS.md).
#
#   bash ci/prepare_triton_kernels.sh TRITON_GIT [REF]     REF defaults to v3.6.0 (the GPU image's triton)
#
# TRITON_GIT: a Triton git directory (bare mirror or .git) or a checkout. Nothing is built; files are
# copied as they are at REF. GCMOE_PEERS_DIR overrides the destination (tests); only the default
# destination is added to .git/info/exclude.
set -euo pipefail
SRC=${1:?usage: $0 TRITON_GIT [REF]}
REF=${2:-v3.6.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${GCMOE_PEERS_DIR:-$ROOT/.peers}

if git --git-dir="$SRC" rev-parse -q --verify HEAD >/dev/null 2>&1 || \
   git --git-dir="$SRC" rev-parse -q --verify "$REF^{commit}" >/dev/null 2>&1; then
  GD=$(cd "$SRC" && pwd)
else
  GD=$(git -C "$SRC" rev-parse --absolute-git-dir)
fi
COMMIT=$(git --git-dir="$GD" rev-parse -q --verify "$REF^{commit}") || { echo "no commit $REF in $GD" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
git --git-dir="$GD" archive --format=tar "$COMMIT" python/triton_kernels | tar -x -C "$TMP" || {
  echo "$REF ($COMMIT) has no python/triton_kernels" >&2; exit 1; }
PKG=$TMP/python/triton_kernels/triton_kernels
# the baseline calls 3.6.0's matmul_ogs API (RoutingData in matmul_ogs.py); later trees renamed it to matmul
if ! grep -q "^class RoutingData" "$PKG/matmul_ogs.py" 2>/dev/null; then
  echo "$REF ($COMMIT): triton_kernels/matmul_ogs.py does not define RoutingData: not the API" \
       "gcmoe_runtime/bench/baselines/triton_ogs.py calls (Triton v3.6.0)" >&2
  exit 1
fi
mkdir -p "$DEST"
rm -rf "$DEST/triton_kernels"
cp -R "$PKG" "$DEST/triton_kernels"
printf 'ref %s\ncommit %s\nfrom %s\n' "$REF" "$COMMIT" "$GD" > "$DEST/triton_kernels.SOURCE"

if [ "$DEST" = "$ROOT/.peers" ]; then
  EXCL=$(git -C "$ROOT" rev-parse --git-path info/exclude)
  case $EXCL in /*) ;; *) EXCL=$ROOT/$EXCL ;; esac
  mkdir -p "$(dirname "$EXCL")"
  grep -qx '/.peers/' "$EXCL" 2>/dev/null || echo '/.peers/' >> "$EXCL"
fi
echo "triton_kernels $REF ($COMMIT) -> $DEST/triton_kernels ($(find "$DEST/triton_kernels" -name '*.py' | wc -l) .py files)"
