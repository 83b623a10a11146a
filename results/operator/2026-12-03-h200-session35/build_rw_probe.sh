#!/usr/bin/env bash
# Session 35 probe (dev, never shipped): trace bundles whose W1 epilogue takes routing weight 1.0 instead of loading it
# (timing only: outputs wrong) — how much of a W1 task's "after" is the routing weights' global loads.
set -euo pipefail
repo=/work/main
out=$repo/build/bundles_trace35d
mkdir -p $out
src=$(mktemp -d /tmp/gcmoe-probe.XXXXXX)
(cd $repo && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C $src
sed -i 's/^TRACE = False$/TRACE = True/' $src/gcmoe_build/kernels/sm90/role2_ring.py
sed -i 's/rws\[key\] = ld_global_f32(rw_addr(n))/rws[key] = Float32(1.0)/' $src/gcmoe_build/kernels/sm90/role2_gemm.py
grep -q "rws\[key\] = Float32(1.0)" $src/gcmoe_build/kernels/sm90/role2_gemm.py
cd $src
export PYTHONPATH=$src
$repo/.venv/bin/python -m gcmoe_build.cli compile manifests/rank-share-glm-5.2-p8.yaml --arch sm_90a --store $src/store --jobs 2 --no-progress | tail -2
$repo/.venv/bin/python -m gcmoe_build.cli bundle manifests/rank-share-glm-5.2-p8.yaml --arch sm_90a --store $src/store -o $out/rank-share-glm-5.2-p8-sm90a-trace.gcmoe
rm -rf $src
