"""Benchmark (not a test): the tensor-core rate of role2's MMA pattern alone (gcmoe_build.kernels.sm90.qgmma_probe),
register-A vs shared-A, N = 8..64 (and one slab per warpgroup at N = 64 / 128), one CTA of two warpgroups per SM.

``GCMOE_QGMMA_CUBINS=DIR python3 tests/build/kernels/sm90/bench_qgmma.py [--json OUT]`` on the GPU machine
(DIR from ``python -m gcmoe_build.kernels.sm90.qgmma_probe DIR``). Prints TFLOPS (dense FP8 peak of an H200: 1979)
and the cost of one K256 x 256-row unit (role2's per-SM work unit) in microseconds per SM.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from tests.build.kernels.sm90.role2_harness import Role2Kernels, time_raw_launch  # noqa: E402

ITERS = 2048
WGS = 2


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    k = Role2Kernels(Path(os.environ.get("GCMOE_QGMMA_CUBINS", "build/qgmma_probe")))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(sms * 256, dtype=torch.float32, device="cuda")
    rows = []
    print(f"{'kernel':24} {'us':>9} {'TFLOPS':>8} {'%peak':>6} {'us/unit':>8}")
    for name in sorted(k.index, key=lambda s: (k.index[s]["mode"], k.index[s]["n"])):  # rs, rs1, ss, ss1
        _, _, fn, info = k.function(name)
        vals = [(ctypes.c_uint64 * 1)(out.data_ptr()), (ctypes.c_int32 * 1)(ITERS)]
        t = time_raw_launch(fn, sms, info["threads"], info["smem"], vals)
        n, slabs = info["n"], info.get("slabs", 2)
        flops = sms * WGS * ITERS * 2 * 4 * slabs * 2 * 64 * n * 32
        # role2's unit: 256 rows x K256 = both warpgroups' 2 K128 steps, i.e. one iteration here (one-slab builds:
        # 128 rows x K256 per iteration, so two iterations)
        unit_us = t / ITERS * 2 / slabs
        rows.append(dict(kernel=name, mode=info["mode"], n=n, us=t, tflops=flops / t / 1e6, unit_us=unit_us))
        print(f"{name:24} {t:9.1f} {flops / t / 1e6:8.1f} {flops / t / 1e6 / 1979 * 100:5.1f}% {unit_us:8.4f}")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(0), iters=ITERS, rows=rows), indent=1))


if __name__ == "__main__":
    main()
