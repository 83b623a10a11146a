"""Benchmark (not a test) of the SM90 role2 GEMM cubins: kernel time and achieved weight bandwidth.

``python3 tests/build/kernels/sm90/bench_role2.py [--json OUT.json]`` on the GPU machine. Per model
shape, every local expert (E/8) active with ``m`` tokens in one ring block of BM tokens; W1 and W2
timed separately with CUDA events: the median over 30 samples (after 5 warm-ups) of ``--batch`` back-to-back launches
per sample / ``--batch`` (the weights are several x the L2, so repeats stream from HBM). ``--batch 1`` times one
launch after an idle GPU, which includes the host's launch path (a ctypes call per launch, different for the
persistent kernels' 17 parameters): what sessions 3-11 (call C) reported. Bandwidth = (packed weight + scale bytes of
the active experts) / time, against the HBM read bandwidth of a streaming reduction measured in the same run (same
batching). ``--shapes`` / ``--points TOKENS:BM,...`` pick a subset; ``--experts N,...`` times each point at other
active-expert counts than E/8: a sweep of it sets the tasks per CTA and separates a launch's fixed cost from the
per-task time (session 24, ``results/operator/2026-12-02-h200-session24/plot_sweep.py``).
Each row also records the SM clock, board power and the share of samples held by the 700 W software power cap over
its timed samples (NVML, :class:`role2_harness.ClockSampler`); ``--sustain S`` runs each point S seconds before its
samples so that every point is timed at the steady power-capped clock (session 25 call E: short runs of one variant
stay at 1 980 MHz, runs of several reach the cap and drop to 1 500-1 950 MHz, which moved W2 at BM 32 by 5 points).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from tests.build.kernels.sm90.role2_harness import (ClockSampler, RingSignals, Role2Kernels, e4m3_random,  # noqa: E402
                                                    random_packed_experts, time_launch)

SHAPES = {"glm52": (6144, 2048, 256 // 8), "dsv41flash": (5120, 2304, 384 // 8)}
POINTS = [(1, 8), (8, 8), (16, 16), (32, 32), (64, 64)]  # (tokens per expert, BM)
VARIANTS = ("", "_p", "_pp")  # 256-thread register-prefetch, 384-thread bulk-copy pipelined, + persistent
# experiments (role2_devbuild --experiments): _p_lag2/_p_lag3/_pp_lag3 (MMA lag), _o2 (256 threads, 2 CTAs per SM)


def stream_read_bw(torch, batch=1):
    x = torch.empty(2 * 1024**3 // 4, dtype=torch.float32, device="cuda").uniform_()
    return x.numel() * 4 / time_launch(x.sum, reps=10, batch=batch)


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated name suffixes; '' is the 256-thread kernel (e.g. ',_p,_pp,_p_lag3')")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated model shapes (default: both)")
    ap.add_argument("--points", default="",
                    help="comma-separated TOKENS:BM pairs (default: " + ",".join(f"{m}:{b}" for m, b in POINTS) + ")")
    ap.add_argument("--experts", default="",
                    help="comma-separated active expert counts, each timed (default: the shape's E/8); a sweep "
                         "of it separates a launch's fixed cost from the per-task cost (tasks per CTA grow with it)")
    ap.add_argument("--batch", type=int, default=8,
                    help="back-to-back launches per timed sample (1: one launch after an idle GPU, host path included)")
    ap.add_argument("--sustain", type=float, default=0.0,
                    help="seconds of launches before each point's timed samples, so that they run at the board's "
                         "steady power-capped clock whatever ran before (session 25 call E; e.g. 1.5)")
    a = ap.parse_args()
    variants = tuple(a.variants.split(","))
    points = [tuple(int(x) for x in p.split(":")) for p in a.points.split(",") if p] or POINTS
    k = Role2Kernels()
    bw = stream_read_bw(torch, a.batch)
    clocks = ClockSampler()
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(7)
    runs = [(shape, h, i, e1) for shape in a.shapes.split(",") for h, i, e0 in [SHAPES[shape]]
            for e1 in ([int(x) for x in a.experts.split(",") if x] or [e0])]
    for shape, h, i, e in runs:
        w1, s1, w2, s2, ef, bexp = random_packed_experts(torch, e, h, i, gen)
        for (m, bm), var in [(pt, v) for pt in points for v in variants]:
            name1, name2 = f"role2_w1_{shape}_bm{bm}{var}", f"role2_w2_{shape}_bm{bm}{var}"
            if name1 not in k.index or name2 not in k.index:
                continue
            ntok = torch.full((e,), m, dtype=torch.int32, device="cuda")
            win = []  # the timed samples' (start, end) of W1, then W2: the clock sampler's windows
            act = e4m3_random(torch, (e, bm, h), gen)
            asc = torch.full((e, bm, h // 128), 0.01, device="cuda")
            rw = torch.rand((e, bm), device="cuda", generator=gen)
            l2 = torch.empty((e, bm, i), dtype=torch.uint8, device="cuda")
            # UE8M0 scales of the intermediate, sized for per-32 scales so cubins built before session 8 can be A/B-timed too
            l2s = torch.empty((e, bm, i // 32), dtype=torch.uint8, device="cuda")
            rowidx = torch.arange(e * bm, dtype=torch.int32, device="cuda").view(e, bm)
            out = torch.empty((e * bm, h), dtype=torch.bfloat16, device="cuda")
            if "_pp" in var:  # ring already full: every block published, every W1 mask bit set for W2
                sig = RingSignals(e, bm)
                sig.ready()
                sig.l2_mask.fill_(-1)
                # every CTA co-resident: ctas_per_sm of them on each SM
                nsm = torch.cuda.get_device_properties(0).multi_processor_count * k.index[name1].get("ctas_per_sm", 1)
                p1 = [w1.data_ptr(), s1.data_ptr(), ef.data_ptr(), act.data_ptr(), asc.data_ptr(), bexp.data_ptr(),
                      ntok.data_ptr(), sig.gen.data_ptr(), rw.data_ptr(), l2.data_ptr(), l2s.data_ptr(),
                      sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(), 0]
                t1 = time_launch(lambda: k.launch_persistent(name1, nsm, p1, e), batch=a.batch, sustain_s=a.sustain,
                                 window=win)
                p2 = [w2.data_ptr(), s2.data_ptr(), ef.data_ptr(), l2.data_ptr(), l2s.data_ptr(), bexp.data_ptr(),
                      ntok.data_ptr(), sig.gen.data_ptr(), rowidx.data_ptr(), out.data_ptr(), 0,
                      sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(), 0]
                t2 = time_launch(lambda: k.launch_persistent(name2, nsm, p2, e), batch=a.batch, sustain_s=a.sustain,
                                 window=win)
            else:
                p1 = [w1.data_ptr(), s1.data_ptr(), ef.data_ptr(), act.data_ptr(), asc.data_ptr(), bexp.data_ptr(),
                      ntok.data_ptr(), rw.data_ptr(), l2.data_ptr(), l2s.data_ptr()]
                t1 = time_launch(lambda: k.launch(name1, e, p1), batch=a.batch, sustain_s=a.sustain, window=win)
                p2 = [w2.data_ptr(), s2.data_ptr(), ef.data_ptr(), l2.data_ptr(), l2s.data_ptr(), bexp.data_ptr(),
                      ntok.data_ptr(), rowidx.data_ptr(), out.data_ptr(), 0]
                t2 = time_launch(lambda: k.launch(name2, e, p2), batch=a.batch, sustain_s=a.sustain, window=win)
            b1 = w1.numel() + s1.numel()
            b2 = w2.numel() + s2.numel()
            rows.append({"shape": shape, "variant": var or "256t", "experts": e, "tokens_per_expert": m, "bm": bm,
                         "w1_us": t1 * 1e6, "w2_us": t2 * 1e6, "w1_bytes": b1, "w2_bytes": b2,
                         "w1_frac_bw": b1 / t1 / bw, "w2_frac_bw": b2 / t2 / bw,
                         "floor_us": (b1 + b2) / bw * 1e6,
                         "w1_clock": clocks.summary(*win[0]), "w2_clock": clocks.summary(*win[1])})
    clocks.close()
    print(f"stream read bandwidth: {bw / 1e12:.2f} TB/s ({torch.cuda.get_device_name()})")
    vw = max([len(r["variant"]) for r in rows] + [3])  # whole names: dev variants differ in their last letters
    print(f"{'shape':11s} {'var':{vw}s} {'E':>3s} {'m':>3s} {'BM':>3s} {'W1 us':>8s} {'W2 us':>8s} {'floor us':>8s} "
          f"{'W1 %bw':>7s} {'W2 %bw':>7s}  SM MHz W1/W2 (power-capped share)")
    for r in rows:
        clk = "  ".join(f"{c['sm_mhz']:5.0f} ({c['power_capped']:.0%})" if c else "    -" for c in
                        (r["w1_clock"], r["w2_clock"]))
        print(f"{r['shape']:11s} {r['variant']:{vw}s} {r['experts']:3d} {r['tokens_per_expert']:3d} {r['bm']:3d} "
              f"{r['w1_us']:8.1f} {r['w2_us']:8.1f} {r['floor_us']:8.1f} {100 * r['w1_frac_bw']:6.1f}% "
              f"{100 * r['w2_frac_bw']:6.1f}%  {clk}")
    if a.json:
        Path(a.json).write_text(json.dumps({"stream_read_Bps": bw, "batch": a.batch, "sustain_s": a.sustain,
                                            "gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
