"""Session 57: the FP4 decode's cost in the BM 64 turns form, 64 tokens per expert (call 5, H200; call 1, H100).

    .venv/bin/python results/operator/2026-12-05-session57/decode_probe_plot.py

Reads the two A/B orders' bench_role2 JSON of each card (k64-a: _ppksafw, _ppksafwx, _ppksafwr; k64-b reversed)
and plots each form's share of that run's streaming read (mean of the two orders) for W1 and W2, per shape,
against issue 5's 70 % line. Writes decode_probe.png beside this file.
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
FORMS = [("_ppksafw", "turns, plain K order"), ("_ppksafwx", "same, no FP4 decode (probe)"),
         ("_ppksafwr", "turns, interleaved K (shipped mirror)")]
CARDS = [("call-5-h200", "H200"), ("call-1-h100", "H100")]


def shares(call: str) -> dict:
    out: dict = {}
    for name in ("k64-a", "k64-b"):
        for r in json.loads((HERE / call / "json" / f"{name}.json").read_text())["rows"]:
            for gemm in ("w1", "w2"):
                out.setdefault((r["shape"], r["variant"], gemm), []).append(100 * r[f"{gemm}_frac_bw"])
    return {k: sum(v) / len(v) for k, v in out.items()}


fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, (call, card) in zip(axes, CARDS):
    s = shares(call)
    groups = [(shape, gemm) for shape in ("glm52", "dsv41flash") for gemm in ("w1", "w2")]
    width = 0.27
    for i, (form, label) in enumerate(FORMS):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ys = [s[(shape, form, gemm)] for shape, gemm in groups]
        ax.bar(xs, ys, width, label=f"{label} ({form})")
        for x, y in zip(xs, ys):
            ax.text(x, y + 0.5, f"{y:.0f}", ha="center", fontsize=7)
    ax.axhline(70, color="k", ls="--", lw=0.8)
    ax.set_xticks(range(len(groups)), [f"{'GLM-5.2' if sh == 'glm52' else 'DSV-4.1-Flash'} {g.upper()}"
                                       for sh, g in groups], fontsize=8)
    ax.set_title(f"BM 64, 64 tokens/expert, {card} (share of that run's streaming read)", fontsize=9)
axes[0].set_ylabel("% of measured read bandwidth")
axes[0].legend(fontsize=7, loc="lower left")
fig.tight_layout()
fig.savefig(HERE / "decode_probe.png", dpi=110)
