#!/bin/bash
# One GPU-machine batch for the operator evidence (issue 6): role1/role3 isolation on the test model and
# both production shapes, P = 1 and P = 2, plus the public API's host checks. Logs + JSON lines under $OUT.
# Usage (from the repo root, after `source ci/gpu_env.sh`): bash tests/runtime/operator/run_gpu_evidence.sh
export PYTHONPATH=$PYTHONPATH:$PWD/tests/runtime/operator
run() {  # name, shape, replays, command...
  local name=$1 shape=$2 reps=$3; shift 3
  GCMOE_SHAPE=$shape GCMOE_REPLAYS=$reps timeout 150 "$@" > $OUT/$name.log 2>&1
  echo "$name rc=$? $(grep -h RESULT $OUT/$name.log | tr '\n' ' ')"
}
T=tests/runtime/operator/gpu_role13.py
run test_p1 test 10000 env CUDA_VISIBLE_DEVICES=0 python3 $T $OUT/test_p1.jsonl
run test_p2 test 10000 torchrun --nproc-per-node 2 $T $OUT/test_p2.jsonl
run glm52_p1 glm52 1000 env CUDA_VISIBLE_DEVICES=0 python3 $T $OUT/glm52_p1.jsonl
run glm52_p2 glm52 1000 torchrun --nproc-per-node 2 $T $OUT/glm52_p2.jsonl
run dsv_p1 dsv41flash 1000 env CUDA_VISIBLE_DEVICES=0 python3 $T $OUT/dsv_p1.jsonl
GCMOE_TRAP_PROBES=0 run dsv_p2 dsv41flash 1000 torchrun --nproc-per-node 2 $T $OUT/dsv_p2.jsonl
run api_p1 test 0 env CUDA_VISIBLE_DEVICES=0 python3 tests/runtime/operator/gpu_api_checks.py $OUT/api_p1.jsonl
run api_p2 test 0 torchrun --nproc-per-node 2 tests/runtime/operator/gpu_api_checks.py $OUT/api_p2.jsonl
python3 - <<'PY'
import glob, json, os
out = os.environ["OUT"]
for f in sorted(glob.glob(out + "/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        if r.get("kind") == "setup":
            continue
        extra = r.get("device_us_per_replay") or r.get("host_s_per_pair_incl_syncs") or r.get("trap_code") or ""
        bad = [c["check"] for c in r.get("checks", []) if not c["ok"]]
        print(os.path.basename(f), r.get("kind"), r.get("case", r.get("probe", "")), "rank", r.get("rank"),
              "ok", r.get("ok"), extra, (r.get("errors") or "")[:3] if r.get("errors") else "", bad or "")
PY
