#!/usr/bin/env bash
# Fills .whl/ (ignored by git) with the wheels the runtime needs on the GPU machine, which has torch 2.11
# (Python 3.12), cuda-bindings, click and PyYAML but no package index. Name `.whl` in the device call's
# `carry` and start the command with ci/gpu_env.sh (it installs them into /tmp/site).
#
# Also the external peer baseline humming-kernels (docs/PEERS.md). Its Requires-Dist (torch, triton, numpy,
# safetensors, jinja2, cuda-bindings, tqdm, tabulate; undeclared: filelock, packaging) are all in the GPU
# image (/work/.library/device/KINDS.md), so only the wheel itself travels. nvidia-cuda-cccl (from its
# `cu13` extra; the image lacks it) travels for the fallback in docs/PEERS.md: humming's NVRTC kernels
# include <cuda/std/...> from CCCL, 13.0.x to match the image's torch 2.11+cu130.
#
# Also DeepGEMM's Hopper Mega MoE (`--impl deepgemm-mega-fp8`, docs/PEERS.md): sgl-deep-gemm 0.1.5.post1, the newest
# wheel built against torch <= 2.12 headers (results/bench/peers/deepgemm-survey.md; later ones need torch 2.13),
# and its one runtime dependency apache-tvm-ffi 0.1.11 (whose own dependency, typing-extensions, is in the image).
#
# `bash ci/prepare_device_wheels.sh --runtime-only` fills .whl-rt/ with the first two alone (5.6 MB instead of 17): the
# tree (tracked files alone ~59 MB since session 16) plus carry must stay under the device's 64 MiB, so a call that
# runs no peer baseline carries `.whl-rt` and sets GCMOE_WHEELS=.whl-rt for ci/gpu_env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=("zstandard==0.25.0" "pytest-timeout==2.4.0" "humming-kernels==0.1.20" "nvidia-cuda-cccl==13.0.85"
        "sgl-deep-gemm==0.1.5.post1" "apache-tvm-ffi==0.1.11")
DIR=.whl
if [[ ${1:-} == --runtime-only ]]; then WHEELS=("${WHEELS[@]:0:2}"); DIR=.whl-rt; fi
mkdir -p "$DIR"
# one version of each wheel: drop any other version of a name pinned above (wheel file names use _ for -)
for spec in "${WHEELS[@]}"; do
  name=${spec%%==*}; name=${name//-/_}; version=${spec##*==}
  for f in "$DIR"/"$name"-*.whl; do
    if [[ -e $f && $(basename "$f") != "$name-$version-"* ]]; then rm -f -- "$f"; fi
  done
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DIR" "${WHEELS[@]}" 2>&1 | grep -v "is ignored" || true
ls -la "$DIR"
