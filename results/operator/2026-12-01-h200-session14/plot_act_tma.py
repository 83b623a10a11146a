"""Plot: session 14's activation chunks by tensor map (act_tma). Left: kernel alone (call A, dev kernels, two
alternating runs per arm), new / old mean time per tokens-per-expert point, W1 and W2, one CTA (`_ppksa` vs `_ppks`)
and two CTAs (`_pp2ksa` vs `_pp2ks`), both production shapes. Right: the layer at P = 1 (call B, one H200, three
alternating runs per arm: the shipped ring bundles with act_tma vs session 13's).

    python3 plot_act_tma.py   (writes plots/act_tma.png; needs matplotlib)
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from kernel_ab import pairs  # noqa: E402
from layer_ab import ratio  # noqa: E402

runs = [HERE / "call-a" / "json" / f for f in ("bench_1a.json", "bench_1b.json", "bench_2a.json", "bench_2b.json")]
fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4))
for new, old, label, mk in (("_ppksa", "_ppks", "one CTA", "o"), ("_pp2ksa", "_pp2ks", "two CTAs", "s")):
    rows = pairs([str(r) for r in runs], new, old)
    for shape, ls in (("glm52", "-"), ("dsv41flash", "--")):
        sel = [r for r in rows if r[0] == shape and r[1] == new]
        ms = [r[2] for r in sel]
        for i, gemm in ((4, "W1"), (5, "W2")):
            ax.plot(ms, [r[i][1] / r[i][0] for r in sel], mk + ls, label=f"{gemm} {label} {shape}",
                    alpha=0.9 if gemm == "W1" else 0.6)


def style(a, xlabel, ylabel, title, **legend):
    a.axhline(1.0, color="grey", lw=0.8)
    a.set_xscale("log", base=2)
    a.set(xlabel=xlabel, ylabel=ylabel, title=title)
    a.grid(alpha=0.3)
    a.legend(**legend)


style(ax, "tokens per expert (BM = 8, 8, 16, 32, 64)", "kernel time, tensor-map chunks / cp.async",
      "kernel alone (dev, E/8 experts, call A)", fontsize=7, ncol=2)
b = HERE / "call-b" / "bench"
r = ratio([b / x for x in ("ab-old", "ab-oldb", "ab-oldc")], [b / x for x in ("ab-new", "ab-newb", "ab-newc")])
for model, fmt in (("glm-5.2", "o-"), ("deepseek-v4.1-flash", "s-")):
    ts = sorted(t for (m, t) in r if m == model)
    bx.plot(ts, [r[(model, t)] for t in ts], fmt, label=model)
style(bx, "tokens (P = 1, routed)", "layer latency, new / session 13", "layer, P = 1 (call B, 3 runs per arm)",
      fontsize=8)
fig.suptitle("Session 14: role2's activation chunks by tensor map (H200)")
fig.tight_layout()
out = HERE / "plots" / "act_tma.png"
fig.savefig(out, dpi=120)
print("wrote", out)
