"""Session 41: where each CTA's second task lands, from the task traces (`bench tasks`, the median replay). Per trace:
the second-round W1 tasks, how many SMs run two of them at once (both CTAs), their median / longest duration and
the last W1 end; the span; and every W1 task's median duration with the SM's other CTA running W1 tasks through more
than half of it, or not (`task_trace.sibling_durations`, which `bench tasks` prints from session 41 on). `python3
placement.py` here (needs the repo's environment: gcmoe_runtime.bench imports torch) -> placement.md."""
import gzip
import json
import statistics
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2]))
from gcmoe_runtime.bench.task_trace import point_tasks, sibling_durations  # noqa: E402

TRACES = [  # (label, trace folder)
    ("DSV-4.1-Flash share T = 4, static split (c3)", "call-a/tasks-static"),
    ("DSV-4.1-Flash share T = 4, claims from the second task (c0)", "call-a/tasks-claims"),
    ("DSV-4.1-Flash P = 1 T = 4, claims from the second task (c3)", "call-c/tasks-c3-dsv"),
    ("DSV-4.1-Flash P = 1 T = 4, claims from the third task (r2c3)", "call-c/tasks-r2c3-dsv"),
    ("GLM-5.2 share T = 2, claims from the third task at every load (r2)", "call-c/tasks-r2-glmsh"),
]


def second_round(tasks):
    by_cta = {}
    for t in tasks:
        by_cta.setdefault(t["cta"], []).append(t)
    return [sorted(v, key=lambda t: t["start"])[1] for v in by_cta.values() if len(v) > 1], len(by_cta)


lines = ["# Second-round placement (session 41 traces, median replay of 3)", "",
         "| trace | CTAs | tasks | 2nd-round W1 | SMs with two | 2nd-round W1 µs median / max | last W1 end µs "
         "| span µs | W1 beside W1 / other µs (tasks) |",
         "|---|---|---|---|---|---|---|---|---|"]
for label, folder in TRACES:
    tasks = point_tasks(json.load(gzip.open(here / folder / "tasks.json.gz"))["models"][0]["points"][0])
    r2, ncta = second_round(tasks)
    w1 = [t for t in r2 if t["w1"]]
    sms = [t["sm"] for t in w1]
    two = sum(1 for s in set(sms) if sms.count(s) > 1)
    durs = [(t["end"] - t["start"]) / 1e3 for t in w1]
    cell = f"{statistics.median(durs):.1f} / {max(durs):.1f}" if durs else "-"
    last_w1 = max(t["end"] for t in tasks if t["w1"]) / 1e3
    span = max(t["end"] for t in tasks) / 1e3
    sib = sibling_durations(tasks)
    beside = " / ".join(f"{sib[k]['dur_us']:.1f} ({sib[k]['n']})" if k in sib else "-"
                        for k in ("w1_pair_w1", "w1_pair_other"))
    lines.append(f"| {label} | {ncta} | {len(tasks)} | {len(w1)} | {two} of {len(set(sms))} | {cell} | {last_w1:.1f} "
                 f"| {span:.1f} | {beside} |")
text = "\n".join(lines) + "\n"
(here / "placement.md").write_text(text)
print(text)
