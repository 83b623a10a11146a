"""One CTA's K128 steps as a Gantt chart from ``stamp_role2.py``'s JSON (session 34).

``python3 plot_stamps.py STAMPS.json[.gz] OUT.png [--cta 0] [--steps 8:20]``: per consumer warpgroup one lane, each step's
phases coloured (stage wait, decode, turn wait, issue, waiting for its MMAs, promote); with lag 1 a step's MMA wait
overlaps the next step's bars, so its row is drawn below the lane (the MMA of step k ends where it is promoted).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.build.kernels.sm90.stamp_role2 import POISON, PHASES, _cyc  # noqa: E402

COLORS = {"stage_wait": "#999999", "decode": "#1f77b4", "turn_wait": "#ff7f0e", "issue": "#9467bd",
          "issued_to_mma_done": "#d62728", "promote": "#2ca02c"}


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--cta", type=int, default=0)
    ap.add_argument("--steps", default="8:20")
    a = ap.parse_args()
    raw = Path(a.json).read_bytes()
    d = json.loads(gzip.decompress(raw) if a.json.endswith(".gz") else raw)
    ev = {e: i for i, e in enumerate(d["events"])}
    s0, s1 = (int(x) for x in a.steps.split(":"))
    cta = d["stamps"][a.cta]
    t0 = cta[0][s0][ev["start"]]
    fig, ax = plt.subplots(figsize=(12, 2.8))
    for wg in (0, 1):
        for gs in range(s0, s1):
            st = cta[wg][gs]
            for name, e0, e1 in PHASES:
                if e0 == "turn" and st[ev["turn"]] == POISON:
                    e0 = "decoded"
                if st[ev[e0]] == POISON or st[ev[e1]] == POISON:
                    continue
                x, w = _cyc(t0, st[ev[e0]]), _cyc(st[ev[e0]], st[ev[e1]])
                y = 2 * (1 - wg) + (-0.45 if name == "issued_to_mma_done" else 0)
                ax.broken_barh([(x, w)], (y, 0.4), color=COLORS[name],
                               label=name if (wg, gs) == (0, s0) else None)
    ax.set_yticks([0.2, 2.2], ["warpgroup 1", "warpgroup 0"])
    ax.set_xlabel("SM cycles from the first step's start")
    ax.set_title(f"{d['name']}, {d['tokens_per_expert']} tokens per expert: CTA {a.cta}, K128 steps {s0}-{s1 - 1}",
                 fontsize=9)
    ax.legend(ncol=6, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
