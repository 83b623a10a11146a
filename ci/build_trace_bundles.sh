#!/usr/bin/env bash
# Bundles whose role2 records stamp every task into the workspace's role2_trace (gcmoe_build/kernels/sm90/role2_ring.py,
# "Task trace"), for `python -m gcmoe_runtime.bench tasks` on the device. A dev instrument, never shipped.
#
# The tree is copied to a scratch folder with role2_ring.TRACE = True (ci/build_variant_bundles.sh --trace), so the
# records' keys (which hash the kernel sources) differ from the shipped build's and nothing lands in this checkout's
# store:
#
#   bash ci/build_trace_bundles.sh [OUT_DIR (default build/bundles_trace)] [MANIFEST ...]
#
# Default manifests: the two production shapes. Carry OUT_DIR to the device and point GCMOE_BENCH_BUNDLES at it. An
# experiment's trace: ci/build_variant_bundles.sh OUT_DIR --diff FILE --trace [MANIFEST ...].
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/build/bundles_trace}"
shift || true
exec bash "$repo/ci/build_variant_bundles.sh" "$out" --trace "$@"
