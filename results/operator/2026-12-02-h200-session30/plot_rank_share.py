"""Session 30: role2's share of the read bandwidth in the layer vs tokens per expert, one rank's share of P = 8 on one
H200 (GLM-5.2 32 experts, DSV-4.1-Flash 48), heuristic tile, 16-warp role1 (call H) -> plots/rank_share.png.

``python3 plot_rank_share.py`` (reads call-h's floor and timelines through session 29's rank_share_table.rows)."""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-02-h200-session29"))
from rank_share_table import rows  # noqa: E402


def style_rank_share_axes(ax, title: str) -> None:
    """The rank-share plots' axes: tokens per expert (log 2), share of the read bandwidth, issue 5's 70 % line."""
    ax.axhline(70, color="grey", ls="--", lw=1)
    ax.text(8.2, 66, "issue 5 target (>= 16 tokens / expert)", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xticks([8, 16, 32, 64], ["8", "16", "32", "64"])
    ax.set_xlabel("tokens per local expert (P = 8 load)")
    ax.set_ylabel("role2 share of read bandwidth (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)


def main() -> None:
    h = HERE / "call-h"
    series = {}
    for spec in ("tl-gs-new", "tl-gs-newb", "tl-ds-new"):
        for r in rows(str(h / "json/floor.json"), [str(h / "tl" / spec / "timeline.json")]):
            series.setdefault(r["model"], {}).setdefault(round(r["mean"]), []).append(r["share"])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for model, pts in sorted(series.items()):
        xs = sorted(pts)
        ax.plot(xs, [100 * sum(pts[x]) / len(pts[x]) for x in xs], "o-", label=model)
    style_rank_share_axes(ax, "role2 in the layer, one rank's share on one H200 (session 30)")
    (HERE / "plots").mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "rank_share.png", dpi=120)


if __name__ == "__main__":
    main()
