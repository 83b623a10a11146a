"""Session 10's paper-protocol runs against the previous full-protocol runs of the same configurations: gc-moe's
slowest-rank median per T, and (a)'s ratio. Writes compare.md and compare.png (python3 with matplotlib).

    python3 compare.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREV = {  # configuration -> the previous full-protocol run (session 8 at P = 2, session 5 at P = 1)
    "paper-glm-p2-routed": "../2026-11-30-h200-x2-session8/call-d/paper-glm-p2-routed",
    "paper-dsv-p2-routed": "../2026-11-30-h200-x2-session8/call-e/paper-dsv-p2-routed",
    "paper-glm-p2-shared": "../2026-11-30-h200-x2-session8/call-e/paper-glm-p2-shared",
    "paper-dsv-p2-shared": "../2026-11-30-h200-x2-session8/call-e/paper-dsv-p2-shared",
    "paper-glm-p1-routed": "../2026-11-30-h200-x2-session5/call-b/paper-glm-p1-routed",
    "paper-dsv-p1-routed": "../2026-11-30-h200-x2-session5/call-b/paper-dsv-p1-routed",
}


def points(d, impl="gc-moe"):
    out = {}
    for mv in json.load(open(HERE / d / "results.json"))["models"]:
        for p in mv["points"]:
            g = p["impls"].get(impl, {})
            if g.get("status") == "ok":
                out[p["T"]] = g["latency_us"]
    return out


lines = ["| configuration | T | previous gc-moe µs | session 10 gc-moe µs | change | session 10 (a) / gc-moe |",
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
for ax, (cfg, (old, new)) in zip(axes.flat, series.items()):
    ts = sorted(set(old) & set(new))
    ax.plot(ts, [old[t] for t in ts], "o--", label="previous full protocol")
    ax.plot(ts, [new[t] for t in ts], "o-", label="session 10")
    ax.set_xscale("log", base=2)
    ax.set_title(cfg[6:])
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("µs (slowest-rank median)")
    ax.legend()
fig.suptitle("gc-moe layer latency, paper protocol (10 + 30 windows), H200")
fig.tight_layout()
fig.savefig(HERE / "compare.png", dpi=110)
