"""Plot: the layer A/Bs of session 12, per T, GLM-5.2 and DeepSeek-V4.1-Flash at P = 2 routed, each the ratio of the
means of two alternating runs per arm: call E (W2's release before its stores vs the session-11 bundles), call G
(releases without their separate fence vs call E's bundles) and their product (session 12 vs session 11).

    python3 plot_layer_ab.py   (writes plots/layer_ab_releases.png; needs matplotlib)
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from layer_ab import ratio as _ratio  # noqa: E402


def ratio(call, old_runs, new_runs):
    return _ratio([HERE / call / "bench" / r for r in old_runs], [HERE / call / "bench" / r for r in new_runs])


e = ratio("call-e", ("ab-old", "ab-oldb"), ("ab-new", "ab-newb"))
g = ratio("call-g", ("ab-e", "ab-eb"), ("ab-g", "ab-gb"))
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, model in zip(axes, ("glm-5.2", "deepseek-v4.1-flash")):
    ts = sorted(t for (m, t) in e if m == model)
    ax.plot(ts, [e[(model, t)] for t in ts], "o-", label="E: W2 released before its stores")
    ax.plot(ts, [g[(model, t)] for t in ts], "s-", label="G: releases without their fence")
    ax.plot(ts, [e[(model, t)] * g[(model, t)] for t in ts], "k^--", label="E x G (vs session 11)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per rank (P = 2, routed)")
    ax.set_title(model)
axes[0].set_ylabel("layer latency, new / old (2 runs per arm)")
axes[0].legend(fontsize=8)
fig.suptitle("Session 12 layer A/Bs (nvidia-h200-x2)")
fig.tight_layout()
(HERE / "plots").mkdir(exist_ok=True)
fig.savefig(HERE / "plots" / "layer_ab_releases.png", dpi=110)
for model in ("glm-5.2", "deepseek-v4.1-flash"):
    ts = sorted(t for (m, t) in e if m == model)
    print(model, " ".join(f"T={t}:{(e[(model, t)] * g[(model, t)] - 1) * 100:+.1f}%" for t in ts))
