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
# runs no peer baseline carries `.whl-rt` and sets GCMOE_WHEELS=.whl-rt for ci/gpu_env.sh. Since session 23 (tracked
# tree ~56 MB, 63.6 MiB in 4 KB blocks) .whl-rt's zstandard wheel is trimmed to its C backend (2.7 MB instead of 5.5):
# the cffi backend (`_cffi*.so`, `backend_cffi.py`) is what `import zstandard` falls back to only when the C one fails
# to load; the trimmed wheel's RECORD drops their lines, so pip installs it as any wheel.
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
if [[ $DIR == .whl-rt ]]; then
  python3 - "$DIR"/zstandard-*.whl <<'PY'
import sys, zipfile, os
for path in sys.argv[1:]:
    drop = lambda n: n.startswith("zstandard/_cffi") or n == "zstandard/backend_cffi.py"  # noqa: E731
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        if not any(drop(n) for n in names):
            continue  # trimmed already
        items = [(i, z.read(i.filename)) for i in z.infolist() if not drop(i.filename)]
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for info, data in items:
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(l for l in data.splitlines(keepends=True) if not drop(l.split(b",")[0].decode()))
            out.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    os.replace(tmp, path)
    print(f"trimmed {path}: cffi backend dropped")
PY
fi
ls -la "$DIR"
