#!/usr/bin/env bash
# One batched GPU-machine call: run named steps, each under its own timeout, log each to $WORK/logs/<step>.log,
# print a summary table last (also kept as logs/summary.md), and pack the logs + JSON (kept under $WORK, default /tmp/gpu_session) into
# $OUT/session.tar.gz: the device returns at most 8 files.
#
#   bash ci/gpu_session.sh STEP_FILE        # STEP_FILE: lines "name | timeout_s | command" ('#' comments)
#
# Steps run in order; a failed or timed-out step does not stop the next one (each is its own process, so a trapped
# CUDA context cannot spoil the rest). A global deadline (GCMOE_SESSION_DEADLINE_S, default 560) skips steps
# that cannot start with at least 20 s left.
set -u
source ci/gpu_env.sh || exit 1
OUT=${OUT:-/tmp/gpu_session_out}; export WORK=${WORK:-/tmp/gpu_session}
mkdir -p "$OUT" "$WORK/logs" "$WORK/json"
deadline=$(( $(date +%s) + ${GCMOE_SESSION_DEADLINE_S:-560} ))
summary=()
# the device copy's .git may be older than its working tree: GCMOE_GIT_COMMIT (the caller's committed sha) is the tree
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv
  echo "tree (GCMOE_GIT_COMMIT): ${GCMOE_GIT_COMMIT:-unset}"; echo "device .git HEAD: $(git rev-parse HEAD 2>/dev/null)"
  echo "steps: $1"; } > "$WORK/logs/00-env.log" 2>&1
# session 11 passed GCMOE_GIT_COMMIT=$(git rev-parse ...) evaluated here, i.e. the stale device HEAD, for every call
dev_head=$(git rev-parse HEAD 2>/dev/null)
if [[ -n "${GCMOE_GIT_COMMIT:-}" && -n "$dev_head" && "$dev_head" == "$GCMOE_GIT_COMMIT"* ]] \
   && [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]]; then
  echo "WARNING: GCMOE_GIT_COMMIT is the device copy's .git HEAD, but the tree differs from it: pass the caller's" \
       "committed sha literally (results would name the wrong tree)" | tee -a "$WORK/logs/00-env.log"
fi
while IFS='|' read -r name tmo cmd; do
  name=$(echo "$name" | sed "s/^[[:space:]]*//;s/[[:space:]]*$//"); [[ -z "$name" || "$name" == \#* ]] && continue
  tmo=$(echo "$tmo" | tr -d "[:space:]")
  left=$(( deadline - $(date +%s) ))
  if (( left < 20 )); then summary+=("| $name | skipped (deadline) | - |"); continue; fi
  (( tmo > left )) && tmo=$left
  t0=$(date +%s.%N)
  echo "=== $name (timeout ${tmo}s): $cmd" | tee "$WORK/logs/$name.log"
  timeout -k 5 "$tmo" bash -c "$cmd" >> "$WORK/logs/$name.log" 2>&1
  rc=$?
  dt=$(python3 -c "import time;print(f'{time.time()-$t0:.0f}')")
  verdict=$( ((rc==0)) && echo ok || { ((rc==124||rc==137)) && echo TIMEOUT || echo "FAIL rc=$rc"; })
  summary+=("| $name | $verdict | ${dt}s |")
  tail -n 4 "$WORK/logs/$name.log" | cut -c1-300
done < "$1"
{ echo "| step | result | wall |"; echo "|---|---|---|"; printf '%s\n' "${summary[@]}"; } > "$WORK/logs/summary.md"
tar -czf "$OUT/session.tar.gz" -C "$WORK" .
echo; cat "$WORK/logs/summary.md"
