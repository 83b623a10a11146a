"""Session 39: at two CTAs per SM, how a task's duration depends on the same SM's other CTA (busy through the task,
idle through it, or mixed), from session 35's task trace of the GLM-5.2 share at T = 64 (BM 32, two CTAs per SM,
the static split). Why: the schedule model (`../2026-12-03-h200-session38/model/sim.py`) keeps each task's measured
duration whatever runs beside it and predicted -7.6 % from dynamic claims there; call A measured -2.7 %.
`python3 sibling_table.py` in this folder -> sibling.md."""
import collections
import gzip
import json
import statistics
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2]))
from gcmoe_runtime.bench import task_trace as tt  # noqa: E402

TRACE, T = here.parent / "2026-12-03-h200-session35" / "call-a" / "tasks" / "glm" / "tasks.json.gz", 64


point = [p for p in json.load(gzip.open(TRACE))["models"][0]["points"] if p["tokens"] == T][0]
tasks = tt.point_tasks(point)
by_sm = collections.defaultdict(list)
for t in tasks:
    by_sm[t["sm"]].append(t)
groups = collections.defaultdict(list)
for sm_tasks in by_sm.values():
    for t in sm_tasks:
        f = tt.sibling_cover(t, sm_tasks)
        state = "busy (> 90 %)" if f > 0.9 else "idle (< 10 %)" if f < 0.1 else "mixed"
        groups[("W1" if t["w1"] else "W2", state)].append(t)
rows = ["| GEMM | the SM's other CTA during the task | tasks | median task µs | median K loop µs |", "|---|---|---|---|---|"]
for (gemm, state), ts in sorted(groups.items()):
    dur = statistics.median(t["end"] - t["start"] for t in ts) / 1e3
    kl = statistics.median(t["kloop_end"] - t["chunk0"] for t in ts) / 1e3
    rows.append(f"| {gemm} | {state} | {len(ts)} | {dur:.1f} | {kl:.1f} |")
text = (f"# Task durations against the SM sibling's work (session 35's trace, GLM-5.2 share T = {T}, BM 32, two CTAs "
        "per SM)\n\n" + "\n".join(rows) + "\n")
(here / "sibling.md").write_text(text)
print(text)
