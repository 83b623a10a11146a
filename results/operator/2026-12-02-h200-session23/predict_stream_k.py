"""Session 23: what Stream-K would give role2 at T = 1-8 (P = 1), from call A's traces.

    .venv/bin/python results/operator/2026-12-02-h200-session23/predict_stream_k.py   # writes stream_k.md / .png here

Per point: the measured role2 span (median of 5 traced replays), the byte floor (W1 + W2 codes and scales of the
replay's tiles at 4.4 TB/s) and ``role2_schedule.stream_k_span`` at the aggregate rate the trace measured with every
CTA streaming W1: 3.15 TB/s at T = 1 (GLM-5.2's split halves, 256 x 12.3 GB/s; one CTA alone on an SM 24.3-27.5 GB/s,
so DSV-4.1-Flash's 128 CTAs reach ~3.2) and 3.85 TB/s from T = 2 (GLM-5.2 T = 4's first W1 round, 256 x 15.1 GB/s).
"""
import gzip
import json
from pathlib import Path

from gcmoe_build.kernels.sm90.role2_schedule import stream_k_span
from gcmoe_runtime.bench import task_trace as tt

HERE = Path(__file__).resolve().parent
SHAPES = {"glm-5.2": (6144, 2048), "deepseek-v4.1-flash": (5120, 2304)}
B = tt.WEIGHT_BYTES_PER_ELEM
rows = []
for name in ("glm", "dsv"):
    res = json.loads(gzip.decompress((HERE / "call-a" / "tasks" / name / "tasks.json.gz").read_bytes()))
    for m in res["models"]:
        H, I = SHAPES[m["model"]]
        for p in m["points"]:
            ts = tt.point_tasks(p)
            w1 = [t for t in ts if t["w1"]]
            split = max(t["split"] for t in w1) + 1
            b1 = len(w1) * 256 * H * B / split
            b2 = sum(1 for t in ts if not t["w1"]) * 256 * I * B
            rate = 3.15e12 if p["tokens"] == 1 else 3.85e12
            rows.append((m["model"], p["tokens"], p["median"]["span_us"], (b1 + b2) / 4.4e12 * 1e6,
                         stream_k_span(b1, b2, rate)))
lines = ["| model | T | role2 span µs (measured) | byte floor µs | Stream-K predicted µs | change |", "|---|---|---|---|---|---|"]
for mod, T, span, floor, sk in rows:
    lines.append(f"| {mod} | {T} | {span:.1f} | {floor:.1f} | {sk:.1f} | {100 * (sk - span) / span:+.1f} % |")
(HERE / "stream_k.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(9, 3.6))
x = range(len(rows))
ax.bar([i - 0.27 for i in x], [r[2] for r in rows], 0.27, label="measured span (call A)")
ax.bar(list(x), [r[4] for r in rows], 0.27, label="Stream-K predicted")
ax.bar([i + 0.27 for i in x], [r[3] for r in rows], 0.27, label="byte floor (4.4 TB/s)")
ax.set_xticks(list(x), [f"{'GLM' if r[0].startswith('glm') else 'DSV'}\nT={r[1]}" for r in rows])
ax.set_yscale("log")
ax.set_ylabel("role2 span, µs (log)")
ax.set_title("role2 at P = 1: measured (per-task trace) vs Stream-K model vs floor")
ax.legend(fontsize=8)
ax.grid(axis="y", alpha=0.3)
fig.tight_layout()
fig.savefig(HERE / "stream_k.png", dpi=100)
