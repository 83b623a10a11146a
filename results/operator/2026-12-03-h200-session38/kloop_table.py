"""Session 38 call B: the task K loops' quantiles per GEMM (`bench tasks`' median over 3 replays, ``kloop_q``), session
36's tree (old, `build/bundles_trace36`) against the shipped shared K loop with one scale load (new,
`build/bundles_trace38`), GLM-5.2 share forced onto BM 48 / 64 / 80: `python3 kloop_table.py` -> kloop_quantiles.md."""
import gzip
import json
from pathlib import Path

here = Path(__file__).parent / "call-b" / "tasks"


def points(run):
    return {p["tokens"]: p["median"] for p in json.load(gzip.open(here / run / "tasks.json.gz"))["models"][0]["points"]}


def q(summary, gemm):
    return summary[gemm]["parts_us"]["kloop_q"]


lines = ["# Task K loops (µs), GLM-5.2 share forced onto BM 48 / 64 / 80, session 38 call B: quantiles 5 / 25 / 50 / "
         "75 / 95 % (median over 3 replays); change = new / old - 1 at the median", "",
         "| BM | T | old W1 | new W1 | W1 change | old W2 | new W2 | W2 change |", "|---|---|---|---|---|---|---|---|"]
for bm in (48, 64, 80):
    old, new = points(f"t36-{bm}"), points(f"t38-{bm}")
    for t in sorted(old):
        row = [str(bm), str(t)]
        for g in ("w1", "w2"):
            o, n = q(old[t], g), q(new[t], g)
            row += [" / ".join(f"{x:.1f}" for x in o), " / ".join(f"{x:.1f}" for x in n), f"{100 * (n[2] / o[2] - 1):+.1f} %"]
        lines.append("| " + " | ".join(row) + " |")
(Path(__file__).parent / "kloop_quantiles.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
