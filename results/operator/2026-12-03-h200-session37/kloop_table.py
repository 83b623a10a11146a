"""Session 37 calls B-C: each task's K loop (first activation chunk landed -> every wgmma waited, `bench tasks`' trace
of the median replay) as quantiles per GEMM, session 36's shipped tree (old) against the shared K loop (new) and its
diagnostics e (W2 always at BM) and f (is1 not warp-uniform): `python3 kloop_table.py` -> kloop_quantiles.md. At BM 48
the W1 tasks' two modes are the narrow (N = 32) and the wide (N = 48) loop."""
import gzip
import json
from pathlib import Path

here = Path(__file__).parent
ARMS = {"old": "call-b/tasks/t36-{bm}", "new": "call-b/tasks/t37-{bm}", "e": "call-c/tasks/t37e-{bm}",
        "f": "call-c/tasks/t37f-{bm}"}
POINTS = ((48, 128), (48, 160), (80, 192), (80, 256))
QS = (0.05, 0.25, 0.5, 0.75, 0.95)


def kloops(path, tokens):
    """(W1, W2) K-loop µs of every task of the point's median replay, sorted."""
    for p in json.load(gzip.open(path / "tasks.json.gz"))["models"][0]["points"]:
        if p["tokens"] == tokens:
            ix = {k: i for i, k in enumerate(p["median_replay"]["fields"])}
            rows = p["median_replay"]["rows"]
            return [sorted((r[ix["kloop_end"]] - r[ix["chunk0"]]) / 1000 for r in rows if r[ix["w1"]] == w)
                    for w in (1, 0)]
    raise KeyError(tokens)


def quantiles(xs):
    return " / ".join(f"{xs[int(len(xs) * q)]:.1f}" for q in QS)


lines = ["# Task K loops (µs), GLM-5.2 share forced onto BM 48 / 80: quantiles 5 / 25 / 50 / 75 / 95 %", "",
         "| BM | T | arm | W1 K loop | W2 K loop |", "|---|---|---|---|---|"]
for bm, t in POINTS:
    for arm, rel in ARMS.items():
        w1, w2 = kloops(here / rel.format(bm=bm), t)
        lines.append(f"| {bm} | {t} | {arm} | {quantiles(w1)} | {quantiles(w2)} |")
(here / "kloop_quantiles.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
