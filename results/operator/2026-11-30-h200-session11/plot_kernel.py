"""Plot: kernel-alone weight streaming (% of the same run's read bandwidth, --batch 8) per tokens-per-expert point of
call F, W1 and W2, both shapes: one CTA per task (_pd / _p2d), the persistent static kernel (_ppd / _pp2d) and with
task records (_ppk / _pp2k); each point the mean of the two orders. The dashed line is issue 5's 70 % target.

    python3 plot_kernel.py   (writes plots/kernel_task_records.png; needs matplotlib)
"""
import json
from collections import defaultdict
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
frac = defaultdict(list)  # (shape, variant, m, gemm) -> fractions
for run in ("bench_1a", "bench_1b", "bench_2a", "bench_2b"):
    for r in json.load(open(HERE / "call-f" / "json" / f"{run}.json"))["rows"]:
        for gemm in ("w1", "w2"):
            frac[(r["shape"], r["variant"], r["tokens_per_expert"], gemm)].append(r[f"{gemm}_frac_bw"])
fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharey=True)
for row, shape in enumerate(("glm52", "dsv41flash")):
    for col, gemm in enumerate(("w1", "w2")):
        ax = axes[row][col]
        for label, (two, one) in {"one CTA per task": ("_p2d", "_pd"), "persistent, static": ("_pp2d", "_ppd"),
                                  "persistent, task records": ("_pp2k", "_ppk")}.items():
            ms, ys = [], []
            for m in (1, 8, 16, 32, 64):
                v = frac.get((shape, two if m <= 16 else one, m, gemm))
                if v:
                    ms.append(m)
                    ys.append(100 * sum(v) / len(v))
            ax.plot(ms, ys, "o-", label=label)
        ax.axhline(70, color="grey", ls="--", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{shape} {gemm.upper()} (BM 8 / 16: two CTAs per SM; 32 / 64: one)")
        ax.set_xlabel("tokens per expert (every local expert active)")
        ax.set_ylabel("% of read bandwidth")
        ax.legend(fontsize=8)
fig.tight_layout()
(HERE / "plots").mkdir(exist_ok=True)
fig.savefig(HERE / "plots" / "kernel_task_records.png", dpi=110)
