"""Diagnose device memory lost per green-partition create/destroy cycle (run on the GPU machine).

Runtime modes: bare (create_partition + destroy), launch (plus one producer launch on the dispatch
stream), launch_compute (on the compute stream). Raw driver modes: desc_only (split + descriptors),
ctx / ctx_defstream (cuGreenCtxCreate + cuGreenCtxDestroy of the two descriptors, flag NONE or
DEFAULT_STREAM; R580 refuses NONE), ctx_stream* (plus a green stream). Prints bytes per cycle.
(Run 2 also tried a zero device-malloc heap per green context: no effect, removed.)
"""
import json
import sys

import torch

from gpu_selftest import Handshake

from gcmoe_runtime import driver, green
from gcmoe_runtime.params import KernelArgs

D = driver.REAL


def run(mode: str, hs, args, n: int = 20) -> dict:
    prod = hs.kernels["role1"]

    def cycle():
        gp = green.create_partition(0, 4)
        if mode == "launch":
            hs.loader.launch(prod, 1, args, gp.dispatch_stream)
        if mode == "launch_compute":
            hs.loader.launch(prod, 1, args, gp.compute_stream)
        gp.destroy()

    cycle()
    torch.cuda.synchronize()
    free0, _ = D.call("cuMemGetInfo")
    for _ in range(n):
        cycle()
    torch.cuda.synchronize()
    free1, _ = D.call("cuMemGetInfo")
    return {"mode": mode, "cycles": n, "bytes_per_cycle": (int(free0) - int(free1)) / n}


def raw(mode: str, n: int = 20) -> dict:
    """Driver calls only, to find which object keeps the memory."""
    cu = D.cu
    dev = D.call("cuDeviceGet", 0)
    sm = D.call("cuDeviceGetDevResource", dev, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)

    def descs():
        groups, _, rem = D.call("cuDevSmResourceSplitByCount", 1, sm, 0, 128)
        return [D.call("cuDevResourceGenerateDesc", [r], 1) for r in (rem, groups[0])]

    fixed = descs()
    flag = (cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM if mode.endswith("defstream")
            else cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_NONE)

    def cycle():
        if mode == "desc_only":
            descs()
            return
        for d in fixed:
            g = D.call("cuGreenCtxCreate", d, dev, flag)
            if mode.startswith("ctx_stream"):
                s = D.call("cuGreenCtxStreamCreate", g, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0)
                D.call("cuStreamDestroy", s)
            D.call("cuGreenCtxDestroy", g)

    cycle()
    torch.cuda.synchronize()
    free0, _ = D.call("cuMemGetInfo")
    for _ in range(n):
        cycle()
    torch.cuda.synchronize()
    free1, _ = D.call("cuMemGetInfo")
    return {"mode": "raw_" + mode, "cycles": n, "bytes_per_cycle": (int(free0) - int(free1)) / n}


def main():
    hs = Handshake(0)
    scratch = torch.zeros(64, dtype=torch.int32, device="cuda:0")
    prod = hs.kernels["role1"]
    args = KernelArgs.build(prod.name, prod.record.params, hs.values(ws_addr=scratch.data_ptr()))
    h0 = D.call("cuCtxGetLimit", D.cu.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE)
    print(json.dumps({"primary_malloc_heap": int(h0)}))
    for mode in sys.argv[1:] or ["desc_only", "ctx", "ctx_defstream", "ctx_stream", "ctx_stream_defstream",
                                 "bare", "launch"]:
        try:
            res = run(mode, hs, args) if mode in ("bare", "launch", "launch_compute") \
                else raw(mode)
            print(json.dumps(res), flush=True)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"mode": mode, "error": str(e)}), flush=True)


if __name__ == "__main__":
    main()
