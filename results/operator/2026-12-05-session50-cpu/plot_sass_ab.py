"""Session 50 (CPU): the role2 K loops' static schedule, shipped bundles against the K-interleave ablation bundles
(``gcmoe_build.sass.schedule_ab``). Writes sass_ab.md (the table) and sass_k_interleave.png (first-probe instructions
per K256 and consumer warp, W1 / W2, per BM) next to this file.

    bash ci/prepare_k_interleave_ab.sh   # build/bundles_kil
    PYTHONPATH=. .venv/bin/python results/operator/2026-12-05-session50-cpu/plot_sass_ab.py
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gcmoe_build.sass import schedule_ab  # noqa: E402
from gcmoe_runtime.artifacts.bundle import open_bundle  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
SHAPES = ("rank-share-glm-5.2-p8", "rank-share-deepseek-v4.1-flash-p8")


def main():
    lines = ["| bundle | variant | K loops: first-probe instructions / stall cycles, plain -> interleaved |",
             "|---|---|---|"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, m in zip(axes, SHAPES):
        rows = schedule_ab(open_bundle(ROOT / "results/operator/bundles" / f"{m}-sm90a.gcmoe"),
                           open_bundle(ROOT / "build/bundles_kil" / f"ablation-k-interleave-{m}-sm90a.gcmoe"))
        pts = {}
        for v, a, b in rows:
            label = f"BM {v['bm']}" + (" x2" if v.get("ctas_per_sm") == 2 else "") + (
                f" split {v['w1_split']}" if v.get("w1_split", 1) != 1 else "")
            cells = "; ".join(f"{x.instructions} / {x.stall_cycles} -> {y.instructions} / {y.stall_cycles}"
                              for x, y in zip(a, b))
            lines.append(f"| {m} | {label} | {cells} |")
            if v.get("w1_split", 1) == 1:
                # per K256 and warp: a loop of 32 QGMMA is a K512 body
                pts[label] = [(x.instructions * 16 / x.qgmma, y.instructions * 16 / y.qgmma) for x, y in zip(a, b)]
        names = sorted(pts, key=lambda s: int(s.split()[1]))
        for k, (gemm, off) in enumerate((("W1", -0.2), ("W2", 0.2))):
            xs = [i + off for i in range(len(names))]
            ax.bar([x - 0.1 for x in xs], [pts[n][min(k, len(pts[n]) - 1)][0] for n in names], 0.2,
                   color="#999999" if k == 0 else "#cccccc", label=f"{gemm} plain")
            ax.bar([x + 0.1 for x in xs], [pts[n][min(k, len(pts[n]) - 1)][1] for n in names], 0.2,
                   color="#1f77b4" if k == 0 else "#9ecae1", label=f"{gemm} k_interleave")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(m, fontsize=9)
        ax.set_ylabel("first-probe instructions per K256 and warp")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("role2 K loops, static schedule (session 50, CPU): plain vs K interleave", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "sass_k_interleave.png", dpi=110)
    (HERE / "sass_ab.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
