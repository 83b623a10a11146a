"""Session 25 call D: the shipped role2 forms' share of the measured read bandwidth, old tree (2585647) against new
(fast_math W1 epilogue), kernel alone, four runs each (BM 8 / 16: `_pp2ksa`, BM 32: `_pp2ksag1`, two CTAs per SM;
BM 64: `_ppksa`, one CTA). python3 plot_shipped.py  (writes plots/shipped_forms.png next to this file)."""
import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from kernel_ab import share_axes  # noqa: E402
SHIPPED = {8: "_pp2ksa", 16: "_pp2ksa", 32: "_pp2ksag1", 64: "_ppksa"}
acc = defaultdict(list)
for arm in ("old", "new"):
    for f in sorted((HERE / "call-d" / "json").glob(f"{arm}_*.json")):
        for r in json.load(open(f))["rows"]:
            if SHIPPED.get(r["bm"]) == r["variant"] and r["tokens_per_expert"] == r["bm"]:
                acc[(arm, r["shape"], r["bm"])].append((r["w1_frac_bw"], r["w2_frac_bw"]))
shapes = sorted({k[1] for k in acc})
fig, axes = plt.subplots(1, len(shapes), figsize=(6.5 * len(shapes), 4.3), squeeze=False)
for ax, shape in zip(axes[0], shapes):
    for arm, color in (("old", "tab:grey"), ("new", "tab:blue")):
        for i, (gemm, style) in enumerate((("W1", "o-"), ("W2", "s--"))):
            bms = sorted(b for a, s, b in acc if a == arm and s == shape)
            ys = [100 * sum(x[i] for x in acc[(arm, shape, b)]) / len(acc[(arm, shape, b)]) for b in bms]
            ax.plot(bms, ys, style, color=color, label=f"{gemm} {arm}")
    share_axes(ax, shape, "tokens per expert (= BM)")
fig.suptitle("role2 kernel alone, shipped forms: old (2585647) vs new (fast_math W1 epilogue), 4 runs each", fontsize=10)
fig.tight_layout()
(HERE / "plots").mkdir(exist_ok=True)
fig.savefig(HERE / "plots" / "shipped_forms.png", dpi=110)
