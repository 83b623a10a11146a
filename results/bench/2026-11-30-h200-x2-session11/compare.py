"""Session 11's paper-protocol runs (call H) against session 10's runs of the same configurations: gc-moe's
slowest-rank median per T, and (a)'s ratio. Writes compare.md and compare.png (python3 with matplotlib). The two
sessions ran on different x2 hosts: the change of the kernels alone is call G's alternating layer A/B
(results/operator/2026-11-30-h200-session11/README.md), not this table.

    python3 compare.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREV = {  # configuration -> session 10's run (calls D / E)
    "paper-glm-p2-routed": "../2026-11-30-h200-x2-session10/paper-glm-p2-routed",
    "paper-dsv-p2-routed": "../2026-11-30-h200-x2-session10/paper-dsv-p2-routed",
    "paper-glm-p2-shared": "../2026-11-30-h200-x2-session10/paper-glm-p2-shared",
    "paper-dsv-p2-shared": "../2026-11-30-h200-x2-session10/paper-dsv-p2-shared",
    "paper-glm-p1-routed": "../2026-11-30-h200-x2-session10/paper-glm-p1-routed",
}


def points(d, impl="gc-moe"):
    out = {}
    for mv in json.load(open(HERE / d / "results.json"))["models"]:
        for p in mv["points"]:
            g = p["impls"].get(impl, {})
            if g.get("status") == "ok":
                out[p["T"]] = g["latency_us"]
    return out


lines = ["| configuration | T | session 10 gc-moe µs | session 11 gc-moe µs | change | session 11 (a) / gc-moe |",
         "|---|---|---|---|---|---|"]
series = {}
for cfg, prev in PREV.items():
    new, old, serial = points(cfg), points(prev), points(cfg, "gc-moe-serial")
    series[cfg] = (old, new)
    for t in sorted(new):
        if t in old:
            lines.append(f"| {cfg[6:]} | {t} | {old[t]:.1f} | {new[t]:.1f} | {(new[t] / old[t] - 1) * 100:+.1f} % | "
                         f"{serial[t] / new[t]:.3f} |")
(HERE / "compare.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    raise SystemExit("no matplotlib: table only")
fig, axes = plt.subplots(2, 3, figsize=(15, 8))
axes.flat[-1].axis("off")
for ax, (cfg, (old, new)) in zip(axes.flat, series.items()):
    ts = sorted(set(old) & set(new))
    ax.plot(ts, [old[t] for t in ts], "o--", label="session 10")
    ax.plot(ts, [new[t] for t in ts], "o-", label="session 11")
    ax.set_xscale("log", base=2)
    ax.set_title(cfg[6:])
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("µs (slowest-rank median)")
    ax.legend()
fig.suptitle("gc-moe layer latency, paper protocol (10 + 30 windows), H200: session 10 vs 11 (different hosts)")
fig.tight_layout()
fig.savefig(HERE / "compare.png", dpi=110)
