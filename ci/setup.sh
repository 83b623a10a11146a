#!/usr/bin/env bash
# Creates .venv with the runtime, the compiler stack (CuTe DSL, locked ptxas) and the test tools.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first and pinned: the CPU build lies on disk on these machines; a bare "torch" would pull a CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[build,test,bench]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import torch, cutlass, pydantic, zstandard, click, yaml, pytest; print('setup ok: torch', torch.__version__)"
