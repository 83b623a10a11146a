"""Session 37: how far role2's span is from its work spread evenly, from call B's task traces of session 36's shipped tree
(GLM-5.2 share, forced tiles): ideal = the first task's start + every task's start -> end summed over the CTAs that ran
one, against the span (the last task's end). `python3 balance_table.py` -> call-b/balance.md."""
import gzip
import json
from pathlib import Path

here = Path(__file__).parent
lines = ["# role2's span against its work spread evenly over the CTAs (µs; session 36's tree, call B's traces)", "",
         "| BM | T | span | first start | work / CTAs (W1 + W2) | W1 last end | W2 first start | ideal | ideal / span |",
         "|---|---|---|---|---|---|---|---|---|"]
for bm in (48, 64, 80):
    d = json.load(gzip.open(here / "call-b" / "tasks" / f"t36-{bm}" / "tasks.json.gz"))
    for p in d["models"][0]["points"]:
        ix = {k: i for i, k in enumerate(p["median_replay"]["fields"])}
        rows = p["median_replay"]["rows"]
        span = max(r[ix["end"]] for r in rows) / 1e3
        first = min(r[ix["start"]] for r in rows) / 1e3
        ctas = len({r[ix["cta"]] for r in rows})
        work = {w: sum(r[ix["end"]] - r[ix["start"]] for r in rows if r[ix["w1"]] == w) / 1e3 / ctas for w in (1, 0)}
        w1_end = max(r[ix["end"]] for r in rows if r[ix["w1"]]) / 1e3
        w2_start = min(r[ix["start"]] for r in rows if not r[ix["w1"]]) / 1e3
        ideal = first + work[1] + work[0]
        lines.append(f"| {bm} | {p['tokens']} | {span:.0f} | {first:.0f} | {work[1] + work[0]:.0f} ({work[1]:.0f} + "
                     f"{work[0]:.0f}) | {w1_end:.0f} | {w2_start:.0f} | {ideal:.0f} | {ideal / span:.2f} |")
(here / "call-b" / "balance.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
