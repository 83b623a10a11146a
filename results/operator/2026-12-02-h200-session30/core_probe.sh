#!/usr/bin/env bash
# Session 30: run crash_probe.py with GPU core dumps on exception, then read the dump with cuda-gdb (which kernel,
# which PC, which warp, the faulting instruction and its registers). Usage: core_probe.sh PRESET CASE (env as for
# crash_probe.py: MODE, REPEATS, GCMOE_OPERATOR_BUNDLE). The dump skips global/shared/local memory and is kept
# outside $WORK (it is hundreds of MB: the device returns only small files). Call B's lesson: a device-side trap
# (a timed-out wait) shows in the dump as an illegal instruction at a PC outside the code (0x7000000c0).
set -u
here=$(dirname "$0")
dir=/tmp/gcmoe_core_$$; mkdir -p "$dir"
CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE="$dir/core_%p.nvcudmp" \
CUDA_COREDUMP_GENERATION_FLAGS="skip_global_memory,skip_shared_memory,skip_local_memory" \
  python3 "$here/crash_probe.py" "$1" "$2"
rc=$?
sleep 2
core=$(ls -S "$dir"/*.nvcudmp 2>/dev/null | head -1)
echo "probe rc=$rc core=${core:-none}"
[[ -z "$core" ]] && exit $rc
ls -la "$dir"
cuda-gdb -batch -q -ex "target cudacore $core" -ex "info cuda kernels" -ex "bt" -ex 'p $errorpc' \
  -ex 'info symbol $errorpc' -ex 'x/28i $errorpc-0xc0' -ex 'x/6i $errorpc' -ex "info cuda warps" -ex "info registers" \
  2>&1 | head -300
rm -rf "$dir"
exit $rc
