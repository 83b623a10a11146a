"""Plot: layer latency with the ring kernel's task records over without them (the session-10 bundles), per T,
GLM-5.2 and DeepSeek-V4.1-Flash at P = 2 (call G), each the ratio of the means of two alternating runs per arm.

    python3 plot_layer_ab.py   (writes plots/layer_ab_task_records.png; needs matplotlib)
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
BENCH = HERE / "call-g" / "bench"
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from layer_ab import ratio  # noqa: E402

r = ratio([BENCH / "ab-old", BENCH / "ab-oldb"], [BENCH / "ab-new", BENCH / "ab-newb"])
fig, ax = plt.subplots(figsize=(7, 4))
for model in ("glm-5.2", "deepseek-v4.1-flash"):
    ts = sorted(t for (m, t) in r if m == model)
    ax.plot(ts, [r[(model, t)] for t in ts], "o-", label=model)
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_xscale("log", base=2)
ax.set_xlabel("tokens per rank (P = 2, routed)")
ax.set_ylabel("latency, task records / session 10")
ax.set_title("Layer A/B: ring task records (call G, 2 alternating runs per arm)")
ax.legend()
fig.tight_layout()
(HERE / "plots").mkdir(exist_ok=True)
fig.savefig(HERE / "plots" / "layer_ab_task_records.png", dpi=110)
