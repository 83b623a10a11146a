#!/usr/bin/env bash
# Session 30: run crash_probe.py with GPU core dumps on exception, then read the dump with cuda-gdb (which kernel,
# which PC, which warp, the faulting instruction and its registers). Usage: core_probe.sh PRESET CASE (env as for
# crash_probe.py: MODE, REPEATS, GCMOE_OPERATOR_BUNDLE). The dump skips global/shared/local memory (small, fast).
set -u
here=$(dirname "$0")
dir=${WORK:-/tmp}/core; mkdir -p "$dir"; rm -f "$dir"/*.nvcudmp
CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE="$dir/core_%p.nvcudmp" \
CUDA_COREDUMP_GENERATION_FLAGS="skip_global_memory,skip_shared_memory,skip_local_memory" \
  python3 "$here/crash_probe.py" "$1" "$2"
rc=$?
core=$(ls "$dir"/*.nvcudmp 2>/dev/null | head -1)
echo "probe rc=$rc core=${core:-none}"
[[ -z "$core" ]] && exit $rc
ls -la "$core"
cuda-gdb -batch -q -ex "target cudacore $core" -ex "info cuda kernels" -ex "bt" -ex 'p $errorpc' -ex 'x/24i $errorpc-0xc0' \
  -ex "info cuda warps" -ex "info registers" 2>&1 | head -400
exit $rc
