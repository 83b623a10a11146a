#!/usr/bin/env bash
# Fills .whl/ (ignored by git) with the wheels the runtime needs on the GPU machine, which has torch 2.11
# (Python 3.12), cuda-bindings, click and PyYAML but no package index. Name `.whl` in the device call's
# `carry` and start the command with ci/gpu_env.sh (it installs them into /tmp/site).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "zstandard==0.25.0" "pytest-timeout==2.4.0" 2>&1 | grep -v "is ignored" || true
ls -la .whl
