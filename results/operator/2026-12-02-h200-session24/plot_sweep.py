"""Call A's expert sweep as a plot: kernel-alone time of W1 / W2 against the tasks each CTA runs, per build.

``python results/operator/2026-12-02-h200-session24/plot_sweep.py`` (this folder's call-a JSON -> plots/sweep.png and
a printed fit): past two tasks per CTA each further task adds about the same time, whose W1 / W2 difference (24 / 8
K256 units per task) splits it into a per-unit time and a per-task fixed cost (docs/PERFORMANCE.md, session 24)."""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
TILES = {"w1": 16, "w2": 24}  # GLM-5.2 row tiles per expert (2I / 256, H / 256)


def load():
    pts = {}
    for f in sorted((HERE / "call-a" / "json").glob("sweep_*.json")):
        for r in json.loads(f.read_text())["rows"]:
            grid = 132 * (1 if r["variant"] == "_ppksa" else 2)
            for mode in ("w1", "w2"):
                n = TILES[mode] * r["experts"] / grid  # mean tasks per CTA (the static split)
                pts.setdefault((r["variant"], r["bm"], mode), []).append((n, r[f"{mode}_us"]))
    return pts


def fit(xy):
    """Least squares t = a + n * T over the points with n >= 1.9 (E = 11 partly hits the L2)."""
    xy = [p for p in xy if p[0] >= 1.9]
    n = len(xy)
    mx, my = sum(x for x, _ in xy) / n, sum(y for _, y in xy) / n
    sl = sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _ in xy)
    return my - sl * mx, sl


def main():
    pts = load()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    for ax, mode in zip(axes, ("w1", "w2")):
        for (var, bm, m), xy in sorted(pts.items()):
            if m != mode or (var, bm) not in (("_pp2ksag1", 8), ("_pp2ksag1", 16), ("_pp2ksag1", 32), ("_ppksa", 64)):
                continue
            a, t = fit(xy)
            ax.plot([x for x, _ in xy], [y for _, y in xy], "o", ms=3, label=f"BM {bm} {var}: {t:.1f} µs/task + {a:.1f}")
            xs = [1, max(x for x, _ in xy)]
            ax.plot(xs, [a + t * x for x in xs], "-", lw=0.8, color=ax.lines[-1].get_color())
            print(f"{mode} BM {bm:2d} {var:10s}: {t:6.1f} µs per task per CTA, intercept {a:6.1f} µs")
        ax.set_title(f"{mode.upper()} (GLM-5.2 shape), kernel alone, two runs per point")
        ax.set_xlabel("mean tasks per CTA (active experts 11-66, static split)")
        ax.set_ylabel("µs per launch")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    (HERE / "plots").mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "sweep.png", dpi=110)


if __name__ == "__main__":
    main()
