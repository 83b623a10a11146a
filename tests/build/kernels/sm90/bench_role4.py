"""Benchmark (not a test) of role4, the SM90 fused shared expert, alone: kernel time per local token count T and
block size BM, from a shipped bundle through the runtime's loader only (green partition, single-rank workspace), as
the layer launches it.

``python3 tests/build/kernels/sm90/bench_role4.py [--model glm-5.2] [--bundle B.gcmoe] [--tokens 1,8,64,128,256]
[--bms 16,32,64] [--json OUT.json]`` (default bundle: the shipped one) on the GPU machine. Per (T, BM): the median over ``--reps`` single launches on the compute
stream, each after an L2 flush (256 MiB written: in the layer role2 streams gigabytes between two role4 calls, so the
shared weights, less than the H200's L2, come from HBM), timed with CUDA events around the launch. ``*`` marks the BM
the runtime picks (``heuristics.choose_shared_bm``); ``--bms`` adds other compiled BMs for T above the largest
candidate. Floor: the shared weight + scale bytes / the streaming read bandwidth measured in the same run. The layer
question it answers: what role4 itself costs, next to what the shared expert adds to the layer (docs/PERFORMANCE.md,
session 15: +48..+156 µs at T = 64-256).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from tests.build.kernels.sm90.bench_role2 import stream_read_bw  # noqa: E402

CAPACITY = 256  # targets[].capacity of every shipped manifest
TIMEOUT_NS = 5_000_000_000


def _setup(model: str, bundle: str):
    import torch

    from gcmoe_runtime import green
    from gcmoe_runtime.accuracy.config import PRESETS
    from gcmoe_runtime.loader import KernelLoader
    from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128, quantize_fp8_weight
    from gcmoe_runtime.numerics.transforms_sm90_shared import transform_shared_sm90
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout
    from gcmoe_runtime.workspace.symmetric import get_workspace

    cfg = PRESETS[model]
    torch.cuda.set_device(0)
    loader = KernelLoader.open(bundle or str(ROOT / "results" / "operator" / "bundles" / f"{model}-sm90a.gcmoe"))
    r4 = [r for r in loader.bundle.records if r.role == "role4"]
    gp = green.get_partition(0, r4[0].variant["dispatch_sms"])
    layout = WorkspaceLayout.build(LayoutSpec(
        arch="sm_90a", world_size=1, num_experts=cfg.num_experts, topk=cfg.topk, hidden=cfg.hidden,
        intermediate=cfg.intermediate, capacity=CAPACITY, bm_candidates=(8, 16, 32, 64), compute_sms=gp.compute_sms,
        shared_experts=True))
    ws = get_workspace(layout, None, 0)
    gen = torch.Generator(device="cuda").manual_seed(11)
    h, i, recipe = cfg.hidden, cfg.intermediate, tuple(cfg.shared_recipe)
    w1 = torch.randn(2 * i, h, generator=gen, device="cuda") * (2.0 / h ** 0.5)
    w2 = torch.randn(h, i, generator=gen, device="cuda") * (1.0 / i ** 0.5)
    q1, s1 = quantize_fp8_weight(w1, recipe)
    q2, s2 = quantize_fp8_weight(w2, recipe)
    sw = transform_shared_sm90(q1, s1, q2, s2, recipe)
    x = torch.randn((CAPACITY, h), generator=gen, device="cuda") * 3.0
    xq, xs = quantize_e4m3_fp32_k128(x)
    ws.view("x").copy_(xq.view(torch.uint8))
    ws.view("x_sf").copy_(xs)
    nbytes = sum(t.numel() * t.element_size() for t in sw.args())
    return loader, gp, ws, sw, sorted({r.variant["bm"] for r in r4}), nbytes


def main():
    import torch

    from gcmoe_runtime.heuristics import choose_shared_bm
    from gcmoe_runtime.operator.values import kernel_args, role_values
    from gcmoe_runtime.workspace.trap import TrapRecord

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="glm-5.2")
    ap.add_argument("--bundle", default="", help="default: results/operator/bundles/<model>-sm90a.gcmoe")
    ap.add_argument("--tokens", default="1,8,64,128,256")
    ap.add_argument("--bms", default="", help="other compiled BMs to time above the largest candidate")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    loader, gp, ws, sw, bms, nbytes = _setup(a.model, a.bundle)
    trap = TrapRecord()
    bw = stream_read_bw(torch)
    flush = torch.empty(256 * 1024 ** 2, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.ExternalStream(int(gp.compute_stream))
    extra = [int(b) for b in a.bms.split(",") if b]
    rows = []
    print(f"stream read bandwidth: {bw / 1e12:.2f} TB/s; shared weights + scales {nbytes / 1e6:.1f} MB, floor "
          f"{nbytes / bw * 1e6:.1f} us")
    print(f"{'model':20s} {'T':>4s} {'BM':>4s} {'us':>8s} {'x floor':>8s}")
    for T in (int(t) for t in a.tokens.split(",")):
        chosen = choose_shared_bm(T)
        for bm in [chosen] + [b for b in extra if b != chosen and b in bms and T > max(bms)]:
            lk = loader.kernel("role4", arch="sm_90a", bm=bm)
            vals = role_values(ws, ntok=T, err=trap.address, timeout_ns=TIMEOUT_NS)
            vals.update(dict(zip(("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale"),
                                 (t.data_ptr() for t in sw.args()))))
            args = kernel_args(lk, vals)
            ts = []
            for rep in range(a.reps + 2):
                flush.fill_(rep & 0xFF)
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(stream)
                loader.launch(lk, gp.compute_sms, args, gp.compute_stream, 0)
                e1.record(stream)
                torch.cuda.synchronize()
                trap.check()
                if rep >= 2:  # two warm-ups (module load, first touch)
                    ts.append(e0.elapsed_time(e1) * 1e3)
            us = statistics.median(ts)
            rows.append({"model": a.model, "T": T, "bm": bm, "chosen": bm == chosen, "us": us,
                         "floor_us": nbytes / bw * 1e6, "read_bw": bw})
            print(f"{a.model:20s} {T:4d} {bm:3d}{'*' if bm == chosen else ' '} {us:8.1f} {us / (nbytes / bw * 1e6):8.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
