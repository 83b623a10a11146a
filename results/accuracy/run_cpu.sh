#!/usr/bin/env bash
# Regenerates the committed CPU accuracy results (reference vs itself and vs the BF16 references):
# the test model (P=2) and both production shapes at E/16 experts in total, P=1 (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
out=results/accuracy/cpu
mkdir -p "$out"
run() { local name=$1; shift; /usr/bin/time -f "$name: %e s wall, %M KB max RSS" \
  "$PY" -m gcmoe_runtime.accuracy "$@" --out "$out/$name.json" --table "$out/$name.txt" --quiet; }
run test-tiny --config test-tiny
run glm-5.2-E16 --config glm-5.2 --cpu-experts 16 --world 1 --capacity 32
run deepseek-v4.1-flash-E24 --config deepseek-v4.1-flash --cpu-experts 24 --world 1 --capacity 32
# The BF16 ideal reference (dequantised weights) as the implementation: it must FAIL the processed-difference
# check against the quantised reference (exit status 1 expected) — evidence that the suite discriminates.
run test-tiny-bf16-impl --config test-tiny --impl bf16-reference || echo "test-tiny-bf16-impl: failed as expected"
