#!/usr/bin/env bash
# Bundles whose role2 records stamp every task into the workspace's role2_trace (gcmoe_build/kernels/sm90/role2_ring.py,
# "Task trace"), for `python -m gcmoe_runtime.bench tasks` on the device. A dev instrument, never shipped.
#
# The tree is copied to a scratch folder with role2_ring.TRACE = True, so the records' keys (which hash the kernel
# sources) differ from the shipped build's and nothing lands in this checkout's store:
#
#   bash ci/build_trace_bundles.sh [OUT_DIR (default build/bundles_trace)] [MANIFEST ...]
#
# Default manifests: the two production shapes. Carry OUT_DIR to the device and point GCMOE_BENCH_BUNDLES at it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/build/bundles_trace}"
shift || true
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # absolute: the compile runs in the scratch copy
manifests=("$@")
[ ${#manifests[@]} -gt 0 ] || manifests=(manifests/glm-5.2.yaml manifests/deepseek-v4.1-flash.yaml)
py="$repo/.venv/bin/python"
src="$(mktemp -d /tmp/gcmoe-trace-src.XXXXXX)"
trap 'rm -rf "$src"' EXIT
# the tracked and untracked-but-not-ignored files, as `git ls-files` lists them
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$src"
ring="$src/gcmoe_build/kernels/sm90/role2_ring.py"
grep -q '^TRACE = False$' "$ring" || { echo "build_trace_bundles: no 'TRACE = False' line in $ring" >&2; exit 1; }
sed -i 's/^TRACE = False$/TRACE = True/' "$ring"
cd "$src"
export PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}"
"$py" -m gcmoe_build.cli compile "${manifests[@]}" --arch sm_90a --store "$src/store" --jobs "${GCMOE_JOBS:-2}" \
    --no-progress | tail -n 3
for m in "${manifests[@]}"; do
    name="$(basename "$m" .yaml)"
    "$py" -m gcmoe_build.cli bundle "$m" --arch sm_90a --store "$src/store" -o "$out/$name-sm90a-trace.gcmoe"
done
ls -l "$out"
