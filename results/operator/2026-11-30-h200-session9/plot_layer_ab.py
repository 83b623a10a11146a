"""Plot: layer latency with the activation prefetch over without it (main), per T, GLM-5.2 and DeepSeek-V4.1-Flash at
P = 1 (call C1) and P = 2 (call F), each the ratio of the means of two alternating runs.

    python3 plot_layer_ab.py   (writes plots/layer_ab_prefetch.png)
"""
import json
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent


def load(d):
    out = {}
    for mv in json.loads((HERE / d / "results.json").read_text())["models"]:
        for p in mv["points"]:
            g = p["impls"].get("gc-moe", {})
            if g.get("status") == "ok":
                out[(mv["shape"]["name"], p["T"])] = g["latency_us"]
    return out


def ratios(old, new):
    o, n = [load(d) for d in old], [load(d) for d in new]
    r = {}
    for k in o[0]:
        r[k] = (sum(x[k] for x in n) / len(n)) / (sum(x[k] for x in o) / len(o))
    return r


runs = {"P = 1 (call C1)": ratios(["call-c1/bench/ab-main", "call-c1/bench/ab-mainb"],
                                  ["call-c1/bench/ab-s9", "call-c1/bench/ab-s9b"]),
        "P = 2 (call F)": ratios(["call-f/bench/ab-main", "call-f/bench/ab-mainb"],
                                 ["call-f/bench/ab-s9", "call-f/bench/ab-s9b"])}
fig, ax = plt.subplots(figsize=(7, 4))
for (label, r), ls in zip(runs.items(), ("--", "-")):
    for model, c in (("glm-5.2", "tab:blue"), ("deepseek-v4.1-flash", "tab:orange")):
        ts = sorted(t for m, t in r if m == model)
        ax.plot(ts, [r[(model, t)] for t in ts], ls, marker="o", color=c, label=f"{model}, {label}")
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_xscale("log", base=2)
ax.set_xlabel("tokens per rank T")
ax.set_ylabel("latency: prefetch / main")
ax.set_title("role2 activation prefetch: layer A/B, H200 (2 runs each)", fontsize=10)
ax.legend(fontsize=7)
fig.tight_layout()
(HERE / "plots").mkdir(exist_ok=True)
fig.savefig(HERE / "plots" / "layer_ab_prefetch.png", dpi=120)
