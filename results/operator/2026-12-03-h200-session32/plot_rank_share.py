"""Session 32: role2's share of the read bandwidth in the layer vs tokens per expert, one rank's share of P = 8 on one
H200, heuristic tile: session 30's curve (call H: GLM-5.2 64 tokens on BM 64, two blocks per expert) and the 64-token
point on BM 80 — session 31 call A (K256 activation chunk, shipped then as build/bundles_s31a) and this session's call A
(K512, shipped) — -> plots/rank_share.png.

``python3 plot_rank_share.py`` (reads the calls' floor and timelines through session 29's rank_share_table.rows)."""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
OPS = HERE.parent
sys.path.insert(0, str(OPS / "2026-12-02-h200-session29"))
from rank_share_table import rows  # noqa: E402

sys.path.insert(0, str(OPS / "2026-12-02-h200-session30"))
from plot_rank_share import style_rank_share_axes  # noqa: E402


def mean_share(call: Path, specs) -> dict:
    """{(model, rounded tokens per expert): mean share} over the call's timelines ``specs``."""
    acc = {}
    for r in rows(str(call / "json/floor.json"), [str(call / "tl" / s / "timeline.json") for s in specs]):
        acc.setdefault((r["model"], round(r["mean"])), []).append(r["share"])
    return {k: 100 * sum(v) / len(v) for k, v in acc.items()}


def main() -> None:
    s30 = mean_share(OPS / "2026-12-02-h200-session30/call-h", ("tl-gs-new", "tl-gs-newb", "tl-ds-new"))
    s31 = mean_share(OPS / "2026-12-02-h200-session31/call-a", ("h1", "h2"))
    s32 = mean_share(HERE / "call-a", ("b1", "b2"))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for model in sorted({m for m, _ in s30}):
        xs = sorted(x for m, x in s30 if m == model)
        ax.plot(xs, [s30[model, x] for x in xs], "o-", label=f"{model} (session 30)")
    for pts, mark, lab in ((s31, "s", "BM 80, K256 chunk (session 31)"), (s32, "D", "BM 80, K512 chunk (shipped, session 32)")):
        xs = sorted(x for m, x in pts if m == "rank-share-glm-5.2-p8" and x == 64)
        ax.plot(xs, [pts["rank-share-glm-5.2-p8", x] for x in xs], mark, ms=7, label=f"GLM-5.2 {lab}")
    style_rank_share_axes(ax, "role2 in the layer, one rank's share on one H200 (sessions 30-32)")
    (HERE / "plots").mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "rank_share.png", dpi=120)


if __name__ == "__main__":
    main()
