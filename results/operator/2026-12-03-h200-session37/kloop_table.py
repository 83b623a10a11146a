"""Session 37 calls B-C: each task's K loop (first activation chunk landed -> every wgmma waited, `bench tasks`' trace
of the median replay) as quantiles per GEMM (`task_trace.summarize`'s ``kloop_q``, which these traces predate),
session 36's shipped tree (old) against the shared K loop (new) and its diagnostics e (W2 always at BM) and f (is1
not warp-uniform): `.venv/bin/python kloop_table.py` (the repo's venv: gcmoe_runtime.bench imports torch) ->
kloop_quantiles.md. At BM 48 the W1 tasks' two modes are the narrow (N = 32) and the wide (N = 48) loop."""
import gzip
import json
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2]))
from gcmoe_runtime.bench import task_trace as tt  # noqa: E402

ARMS = {"old": "call-b/tasks/t36-{bm}", "new": "call-b/tasks/t37-{bm}", "e": "call-c/tasks/t37e-{bm}",
        "f": "call-c/tasks/t37f-{bm}"}
POINTS = ((48, 128), (48, 160), (80, 192), (80, 256))
SHAPE = dict(hidden=6144, intermediate=2048)  # the GLM-5.2 share


def median_replay(path, tokens):
    """The point's median replay, summarised again by today's `task_trace.summarize`."""
    point = next(p for p in json.load(gzip.open(path / "tasks.json.gz"))["models"][0]["points"]
                 if p["tokens"] == tokens)
    return tt.summarize(tt.point_tasks(point), **SHAPE)


def cell(summary, gemm):
    return " / ".join(f"{x:.1f}" for x in summary[gemm]["parts_us"]["kloop_q"])


lines = ["# Task K loops (µs), GLM-5.2 share forced onto BM 48 / 80: quantiles 5 / 25 / 50 / 75 / 95 %", "",
         "| BM | T | arm | W1 K loop | W2 K loop |", "|---|---|---|---|---|"]
for bm, t in POINTS:
    for arm, rel in ARMS.items():
        s = median_replay(here / rel.format(bm=bm), t)
        lines.append(f"| {bm} | {t} | {arm} | {cell(s, 'w1')} | {cell(s, 'w2')} |")
(here / "kloop_quantiles.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
