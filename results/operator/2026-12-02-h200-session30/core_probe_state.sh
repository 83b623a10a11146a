#!/usr/bin/env bash
# Session 30: like core_probe.sh, but the dump keeps global memory, and cuda-gdb prints every thread's PC (coalesced)
# and the workspace's signal regions at the moment of the fault (crash_probe.py PRINT_ADDRS=1 names their addresses).
# Usage: core_probe_state.sh PRESET CASE (env as for crash_probe.py). The dump stays in /tmp (GBs), never in $WORK.
set -u
here=$(dirname "$0")
dir=/tmp/gcmoe_core_$$; mkdir -p "$dir"
log=$dir/probe.log
PRINT_ADDRS=1 CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE="$dir/core_%p.nvcudmp" \
CUDA_COREDUMP_GENERATION_FLAGS="skip_shared_memory,skip_local_memory" \
  python3 "$here/crash_probe.py" "$1" "$2" 2>&1 | tee "$log" | grep -v "^OK call"
grep -c "^OK call" "$log" | sed 's/^/ok calls: /'
sleep 2
core=$(ls -S "$dir"/*.nvcudmp 2>/dev/null | head -1)
echo "core=${core:-none}"
if [[ -n "$core" ]]; then
  ls -la "$dir"
  cmds=(-ex "target cudacore $core" -ex "info cuda kernels" -ex "info cuda blocks" -ex "info cuda threads")
  while read -r _ name addr dt shape; do
    n=$(python3 -c "import math;print(min(256, math.prod(int(v) for v in '$shape'.split('x'))))")
    case $dt in u64) f=xg;; *) f=xw;; esac
    cmds+=(-ex "echo == $name ($dt $shape, first $n)\n" -ex "x/$n$f $addr")
  done < <(grep "^ADDR" "$log")
  cuda-gdb -batch -q "${cmds[@]}" 2>&1 | head -1500
fi
rm -rf "$dir"
