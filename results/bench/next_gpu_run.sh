#!/usr/bin/env bash
# Issue 7 in one GPU call (nvidia-h200-x2, about 8 minutes): see results/bench/NEXT.md for what it needs
# (bundles in build/bundles, wheels in .whl) and how to read what it writes. Run from the repo root:
#     GCMOE_GIT_COMMIT=<short sha> bash results/bench/next_gpu_run.sh
# Every step gets a measurement budget (--budget-s) cut from one overall deadline, so the call ends in
# time and each finished step keeps its results; points a budget cut off are recorded as not measured.
set -u
T0=$(date +%s)
DEADLINE=$((T0 + ${BENCH_TOTAL_S:-465}))
source ci/gpu_env.sh || exit 1
export GCMOE_BENCH_BUNDLES=${GCMOE_BENCH_BUNDLES:-build/bundles} GCMOE_BENCH_TIMEOUT_S=10
R=${BENCH_OUT:-${OUT:-/tmp/out}/bench}
mkdir -p "$R"
B="python3 -m gcmoe_runtime.bench"
PROTO=(--replays 100 --warmup 2 --measured 5 --gate record --floor-json "$R/floor.json"
       --deviation "2 warm-up + 5 measured windows (paper: 10 + 30) and per-invocation time budgets: all of issue 7's configurations in one 8-minute GPU call")
MODELS=(--model test-tiny --model glm-5.2 --model deepseek-v4.1-flash)

left() { echo $((DEADLINE - $(date +%s))); }
# step NAME BUDGET_S ARGS...: run one bench invocation with min(BUDGET_S, time left - 25 s for its start-up)
# BENCH_STEPS="p2-routed p1-routed ..." runs only those steps (a re-run of what an earlier call missed)
step() {
  local name=$1 want=$2; shift 2
  if [ -n "${BENCH_STEPS:-}" ] && [[ " $BENCH_STEPS " != *" $name "* ]]; then return; fi
  local b=$(( $(left) - 25 )); [ "$b" -gt "$want" ] && b=$want
  if [ "$b" -lt 5 ]; then echo "[next] $name: no time left, not run" | tee -a "$R/steps.log"; return; fi
  echo "[next] $name: budget ${b}s, $(left)s left" | tee -a "$R/steps.log"
  timeout -k 10 $((b + 90)) $B "$@" --budget-s "$b" --out "$R/$name" > "$R/$name.log" 2>&1
  echo "[next] $name: rc $? after $(( $(date +%s) - T0 ))s" | tee -a "$R/steps.log"
  tail -n 4 "$R/$name.log"
}

nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$R/gpus.txt"
ls -la build/bundles | tee "$R/bundles.txt"
# 0. preflight: each gc-moe mode captured at P=1 (test-tiny) against the FP32 reference (skips name a missing bundle)
#    (BENCH_PREFLIGHT=0 skips it when the same call already ran the accuracy suite through the API)
if [ "${BENCH_PREFLIGHT:-1}" != 0 ]; then
  timeout 90 python3 -m pytest -q -rs tests/runtime/bench/test_bench_gpu.py -k gcmoe > "$R/preflight.log" 2>&1
  rc=$?
  echo "[next] preflight rc $rc after $(( $(date +%s) - T0 ))s" | tee -a "$R/steps.log"; tail -n 12 "$R/preflight.log"
  # a gc-moe mode that does not match the reference would only produce latencies of wrong numbers
  # (2026-11-30: the shared path ran on untransformed weights and the preflight's failure went unnoticed)
  if [ $rc != 0 ]; then echo "[next] preflight FAILED: no measurements" | tee -a "$R/steps.log"; exit 1; fi
fi
# 1. ceilings once for the whole call (streaming read on both GPUs, NVLink flag round trip)
timeout 60 $B floor --world 2 --json "$R/floor.json" > "$R/floor.log" 2>&1; tail -n 2 "$R/floor.log"
# 2-3. P = 2 (real expert parallelism): subject, baseline (a), torch baselines (e); routed, then + shared
step p2-routed 60 sweep "${MODELS[@]}" --world 2 --impl gc-moe --impl gc-moe-serial --impl torch-fp8 --impl torch-bf16 "${PROTO[@]}"
step p2-shared 60 sweep "${MODELS[@]}" --world 2 --shared --impl gc-moe --impl gc-moe-serial --impl torch-fp8 --impl torch-bf16 "${PROTO[@]}"
# 4. dispatch-SM ablation: requests 4..32 x overlap on/off, GLM-5.2, P = 2, routed
step ablation-glm-p2 45 ablation --model glm-5.2 --world 2 "${PROTO[@]}"
# 5-6. P = 1 (the whole model on one GPU): subject, (a), torch-fp8 (torch-bf16 left out for time: 1.6-1.7x slower
#      than torch-fp8 at every point measured so far, results/bench/2026-11-30-h200-p1ep8-torch-baselines)
step p1-routed 30 sweep "${MODELS[@]}" --world 1 --impl gc-moe --impl gc-moe-serial --impl torch-fp8 "${PROTO[@]}"
step p1-shared 30 sweep "${MODELS[@]}" --world 1 --shared --impl gc-moe --impl gc-moe-serial --impl torch-fp8 "${PROTO[@]}"
# 7. baseline (b), plain streams without isolation, last and alone: a device-side wait that never returns traps
#    after GCMOE_BENCH_TIMEOUT_S and leaves that process's CUDA context unusable
step p2-streams 15 sweep "${MODELS[@]}" --world 2 --impl gc-moe --impl gc-moe-streams "${PROTO[@]}"
echo "[next] done after $(( $(date +%s) - T0 ))s" | tee -a "$R/steps.log"
