# Source me at the start of every GPU-machine command: installs the carried wheels and sets the
# multi-GPU safety variables (never NVLink multicast on these hosts). GCMOE_WHEELS: the carried wheel folder (default
# .whl; .whl-rt from `ci/prepare_device_wheels.sh --runtime-only` when the tree is near the 64 MiB limit).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "${GCMOE_WHEELS:-.whl}"/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
