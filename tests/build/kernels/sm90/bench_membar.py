"""Benchmark (not a test): what a GPU-scope fence costs the warps around it (gcmoe_build.kernels.sm90.membar_probe).

``GCMOE_MEMBAR_CUBINS=DIR python3 tests/build/kernels/sm90/bench_membar.py [--json OUT]`` on the GPU machine (DIR from
``python -m gcmoe_build.kernels.sm90.membar_probe DIR``). Two CTAs per SM of role2's BM 8 consumer pattern; runs every
configuration twice in alternating order and prints, per configuration, the median kernel time, its change against
the reference (``quiet`` for the side-warp modes, ``inline_none`` at the same period for ``inline``) and the cost per
fence event (the change divided by the fences one CTA ran, or by the releases one CTA's worker thread 0 ran).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from tests.build.kernels.sm90.role2_harness import Role2Kernels, time_raw_launch  # noqa: E402

ITERS = 4096
#: (mode, period, gap_ns): the side warp at a role2-like rate (one release per ~5 µs: a W2 BM 8 task) and flat out;
#: the inline release every 8 iterations (16 K128 steps: a GLM-5.2 W2 task) and every 24 (a W1 task)
CONFIGS = [("quiet", 1, 0), ("side", 1, 5000), ("side", 1, 1000), ("side", 1, 0), ("side_store", 1, 1000),
           ("side_acqrel", 1, 1000), ("inline_none", 8, 0), ("inline", 8, 0), ("inline_none", 24, 0),
           ("inline", 24, 0)]


def reference(mode: str, period: int):
    """The configuration a mode is compared with: ``quiet`` for the side-warp modes (and itself), ``inline_none`` at
    the same period for the inline ones."""
    return ("quiet", 1, 0) if mode == "quiet" or mode.startswith("side") else ("inline_none", period, 0)


def summarise(times):
    """``times``: configuration -> [(us, fences per CTA), ...] over the runs. One row per configuration (CONFIGS'
    order) with the mean time, its change against :func:`reference` and the cost per fence event."""
    rows = []
    for c in CONFIGS:
        mode, period, gap = c
        t = statistics.mean(x[0] for x in times[c])
        f = statistics.mean(x[1] for x in times[c])
        tr = statistics.mean(x[0] for x in times[reference(mode, period)])
        per = (t - tr) * 1e3 / f if f else float("nan")
        rows.append(dict(mode=mode, period=period, gap_ns=gap, us=t, runs=[x[0] for x in times[c]], fences=f,
                         change=t / tr - 1, ns_per_fence=per))
    return rows


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=ITERS)
    a = ap.parse_args()
    k = Role2Kernels(Path(os.environ.get("GCMOE_MEMBAR_CUBINS", "build/membar_probe")))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = 2 * sms
    out = torch.empty(grid * 256 + grid, dtype=torch.float32, device="cuda")
    buf = torch.randint(0, 1 << 30, ((256 << 20) // 4,), dtype=torch.int32, device="cuda")
    sig = torch.zeros(4, dtype=torch.int32, device="cuda")

    def run(mode, period, gap):
        _, _, fn, info = k.function(f"membar_probe_{mode}")
        vals = [(ctypes.c_uint64 * 1)(out.data_ptr()), (ctypes.c_uint64 * 1)(buf.data_ptr()),
                (ctypes.c_uint64 * 1)(sig.data_ptr()), (ctypes.c_int32 * 1)(a.iters), (ctypes.c_int32 * 1)(period),
                (ctypes.c_int32 * 1)(gap)]
        t = time_raw_launch(fn, grid, info["threads"], info["smem"], vals, warm=2, reps=7)
        fences = float(out[grid * 256:].mean()) if mode.startswith("side") else (a.iters // period if mode == "inline"
                                                                                else 0)
        return t, fences

    times = {}
    for order in (CONFIGS, CONFIGS[::-1]):
        for c in order:
            t, f = run(*c)
            times.setdefault(c, []).append((t, f))
    rows = summarise(times)
    print(f"{'mode':12} {'period':>6} {'gap ns':>6} {'us':>9} {'fences/CTA':>10} {'change':>8} {'ns/fence':>9}")
    for r in rows:
        print(f"{r['mode']:12} {r['period']:6d} {r['gap_ns']:6d} {r['us']:9.1f} {r['fences']:10.0f} "
              f"{r['change'] * 100:7.2f}% {r['ns_per_fence']:9.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(0), iters=a.iters, grid=grid,
                                                rows=rows), indent=1))


if __name__ == "__main__":
    main()
