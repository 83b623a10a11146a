"""Plot session 8 call B's kernel-alone A/B (role2 W1 / W2 share of the measured read bandwidth, intermediate scale
per 32 vs per 128): ``python results/operator/2026-11-30-h200-x2-session8/plots/plot_kernel_alone.py``."""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
JSON = HERE.parent / "call-b" / "json"


def rows(*names):
    """Mean W1 / W2 bandwidth fractions per (shape, variant, m, bm) over the given runs."""
    acc = {}
    for name in names:
        for r in json.loads((JSON / name).read_text())["rows"]:
            k = (r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])
            acc.setdefault(k, []).append((r["w1_frac_bw"], r["w2_frac_bw"]))
    return {k: tuple(sum(v[i] for v in vs) / len(vs) for i in range(2)) for k, vs in acc.items()}


old = rows("bench_role2_old.json", "bench_role2_old2.json")
new = rows("bench_role2_g128.json", "bench_role2_g128_2.json")
# the builds the layer runs: two CTAs (_p2) up to BM 16, one CTA (_p) at BM 32 / 64
points = [(v, m, bm) for v, m, bm in (("_p2", 1, 8), ("_p2", 8, 8), ("_p2", 16, 16), ("_p", 32, 32), ("_p", 64, 64))]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, shape, title in ((axes[0], "glm52", "GLM-5.2 shape"), (axes[1], "dsv41flash", "DeepSeek-V4.1-Flash shape")):
    labels = [f"m={m}\nBM {bm}{v}" for v, m, bm in points]
    x = range(len(points))
    w = 0.2
    for j, (name, data, gemm, style) in enumerate((("W1 per 32", old, 0, "tab:blue"), ("W1 per 128", new, 0, "tab:cyan"),
                                                  ("W2 per 32", old, 1, "tab:red"), ("W2 per 128", new, 1, "tab:orange"))):
        vals = [100 * data[(shape, v, m, bm)][gemm] for v, m, bm in points]
        ax.bar([i + (j - 1.5) * w for i in x], vals, w, label=name, color=style)
    ax.axhline(70, color="k", ls="--", lw=1, label="issue 5 target (70 %)")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_title(title)
    ax.set_ylabel("% of measured read bandwidth")
axes[0].legend(fontsize=8, loc="upper right")
fig.suptitle("role2 kernel alone, E/8 experts, H200 (session 8 call B): intermediate UE8M0 scale per 32 vs per 128")
fig.tight_layout()
fig.savefig(HERE / "kernel_alone_w1_w2.png", dpi=110)
print("wrote", HERE / "kernel_alone_w1_w2.png")
