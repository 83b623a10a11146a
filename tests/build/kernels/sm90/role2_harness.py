"""GPU harness for the SM90 role2 GEMM cubins: load with the driver library API, make data, launch.

Runs on the GPU machine (torch + cuda-bindings + numpy; no CuTe DSL, no pydantic): cubins come
prebuilt from ``python -m gcmoe_build.kernels.sm90.role2_devbuild build/role2_sm90`` and are
loaded with ``cuLibraryLoadData`` / ``cuLibraryGetKernel`` - never JIT. ``role2_layout`` is
loaded by file path so that importing it pulls in no package ``__init__`` (which may need the DSL).
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[4]
CUBIN_DIR = Path(os.environ.get("GCMOE_ROLE2_CUBINS", REPO / "build" / "role2_sm90"))


def load_layout_module():
    path = REPO / "gcmoe_build" / "kernels" / "sm90" / "role2_layout.py"
    spec = importlib.util.spec_from_file_location("gcmoe_role2_layout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


L = load_layout_module()


def _check(res):
    from cuda.bindings import driver as cu

    if not isinstance(res, tuple):
        res = (res,)
    if res[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {res[0]}")
    return None if len(res) == 1 else (res[1] if len(res) == 2 else res[1:])


class Role2Kernels:
    """All cubins of ``index.json``, loaded lazily through the library API."""

    def __init__(self, cubin_dir: Path = CUBIN_DIR):
        self.dir = Path(cubin_dir)
        self.index = json.loads((self.dir / "index.json").read_text())
        self._fn = {}

    def function(self, name: str):
        from cuda.bindings import driver as cu
        import torch

        if name not in self._fn:
            torch.cuda.init()
            torch.empty(1, device="cuda")  # primary context current
            info = self.index[name]
            data = (self.dir / f"{name}.cubin").read_bytes()
            assert data[:4] == b"\x7fELF", f"{name}: not an ELF cubin; the runtime never JIT-compiles"
            lib = _check(cu.cuLibraryLoadData(data, None, None, 0, None, None, 0))
            kern = _check(cu.cuLibraryGetKernel(lib, info["entry"].encode()))
            dev = torch.cuda.current_device()
            _check(cu.cuKernelSetAttribute(
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, info["smem"], kern, dev))
            fn = _check(cu.cuKernelGetFunction(kern))
            self._fn[name] = (lib, kern, fn, info)
        return self._fn[name]

    def launch(self, name: str, nblocks: int, ptrs: list[int], stream=None):
        from cuda.bindings import driver as cu
        import torch

        _, _, fn, info = self.function(name)
        stream = stream or torch.cuda.current_stream()
        vals = (ctypes.c_uint64 * len(ptrs))(*ptrs)
        ptr_arr = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(vals) + 8 * i for i in range(len(ptrs))])
        _check(cu.cuLaunchKernel(fn, info["row_tiles"], nblocks, 1, info["threads"], 1, 1, info["smem"],
                                 cu.CUstream(stream.cuda_stream), ctypes.addressof(ptr_arr), 0))


def make_expert_weights(rng, e, rows, k, w1: bool):
    """Random MXFP4 weights in kernel row order: codes, UE8M0 scales, per-expert factor."""
    codes = rng.integers(0, 16, size=(e, rows, k), dtype=np.uint8)
    scales = rng.integers(118, 131, size=(e, rows, k // 32), dtype=np.uint8)
    if w1:  # build from separate gate/up to exercise the row-order helper
        half = rows // 2
        codes = L.w1_rows_from_gate_up(codes[:, :half], codes[:, half:])
        scales = L.w1_rows_from_gate_up(scales[:, :half], scales[:, half:])
    efac = (64.0 * np.exp2(rng.integers(-2, 3, size=e))).astype(np.float32)
    return codes, scales, efac


def e4m3_random(torch, shape, gen, scale=1.0):
    x = torch.randn(shape, generator=gen, device="cuda") * scale
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)
