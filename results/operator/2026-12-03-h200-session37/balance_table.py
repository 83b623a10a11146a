"""Session 37: how far role2's span is from its work spread evenly, from call B's task traces of session 36's shipped
tree (GLM-5.2 share, forced tiles): `task_trace.summarize`'s even span (the first task's start + every task's start ->
end summed over the CTAs that ran one; these traces predate it) against the span (the last task's end), of each
point's median replay. `.venv/bin/python balance_table.py` (the repo's venv) -> call-b/balance.md."""
import gzip
import json
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2]))
from gcmoe_runtime.bench import task_trace as tt  # noqa: E402

lines = ["# role2's span against its work spread evenly over the CTAs (µs; session 36's tree, call B's traces)", "",
         "| BM | T | span | first start | work / CTAs (W1 + W2) | W1 last end | W2 first start | ideal "
         "| ideal / span |",
         "|---|---|---|---|---|---|---|---|---|"]
for bm in (48, 64, 80):
    d = json.load(gzip.open(here / "call-b" / "tasks" / f"t36-{bm}" / "tasks.json.gz"))
    for p in d["models"][0]["points"]:
        tasks = tt.point_tasks(p)
        s = tt.summarize(tasks, hidden=6144, intermediate=2048)
        work = {w: sum(t["end"] - t["start"] for t in tasks if t["w1"] == w) / 1e3 / s["ctas"] for w in (1, 0)}
        first = s["w1"]["first_start_us"]
        lines.append(f"| {bm} | {p['tokens']} | {s['span_us']:.0f} | {first:.0f} | {work[1] + work[0]:.0f} "
                     f"({work[1]:.0f} + {work[0]:.0f}) | {s['w1']['last_end_us']:.0f} | "
                     f"{s['w2']['first_start_us']:.0f} | {s['even_span_us']:.0f} | {s['even_span_us'] / s['span_us']:.2f} |")
(here / "call-b" / "balance.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
