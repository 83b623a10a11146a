"""Session 39: session 38's schedule model (`../2026-12-03-h200-session38/model/sim.py`) with per-SM rates for the
two-CTA builds. Each task's measured duration (from a static-split trace) is turned into work at the one-CTA rate —
a task runs 1 / SLOWDOWN as fast while the other CTA of its SM runs a task (`sibling.md`: W2 19.5 against 14.5 µs) —
and the replay is stepped in time with that rate, under the static split and under dynamic claims one task ahead
(each CTA's first task static, as the kernel does). `python3 two_cta_model.py` in this folder -> two_cta_model.md.
Question: does it explain call A's -2.7 % at GLM-5.2 T = 64 (BM 32, two CTAs per SM), where the fixed-duration
model said -7.6 %?"""
import collections
import gzip
import json
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2]))
sys.path.insert(0, str(here.parent / "2026-12-03-h200-session38" / "model"))
import sim  # noqa: E402
from gcmoe_runtime.bench import task_trace as tt  # noqa: E402

SLOWDOWN = 19.5 / 14.5  # sibling.md: a W2 task with its SM sibling busy against idle
DT = 50.0  # ns per step
S35 = here.parent / "2026-12-03-h200-session35" / "call-a" / "tasks"
#: (label, session 35's static-split trace, T, call A's measured change of role2 in the layer)
POINTS = [("GLM-5.2 share T = 64 (BM 32)", S35 / "glm" / "tasks.json.gz", 64, -2.7),
          ("DSV-4.1-Flash share T = 96 (BM 16)", S35 / "dsv" / "tasks.json.gz", 96, -5.7),
          ("DSV-4.1-Flash share T = 192 (BM 32)", S35 / "dsv" / "tasks.json.gz", 192, -5.6)]


def replay(ts, fill, work, sm_of, dynamic, slowdown):
    """Stepped replay: returns the span (ns). work: task -> ns at the one-CTA rate."""
    order = sorted(t["task"] for t in ts)
    by = {t["task"]: t for t in ts}
    ctas = sorted(sm_of)
    G = len(ctas)
    queue = {c: [] for c in ctas}
    if dynamic:
        nxt_claim = G
        for i, c in enumerate(ctas):
            if i < len(order):
                queue[c].append(order[i])
    else:
        for i, k in enumerate(order):
            queue[ctas[i % G]].append(k)
    w1_left = collections.Counter(by[k]["block"] for k in order if by[k]["w1"])
    w1_done = {}
    cur = {c: None for c in ctas}  # (task, remaining work)
    siblings = collections.defaultdict(list)
    for c in ctas:
        siblings[sm_of[c]].append(c)
    now, done = 0.0, 0
    while done < len(order):
        # start what can start
        for c in ctas:
            if cur[c] is None and queue[c]:
                k = queue[c][0]
                t = by[k]
                ready = fill[t["block"]] if t["w1"] else w1_done.get(t["block"])
                if ready is not None and ready <= now:
                    queue[c].pop(0)
                    cur[c] = [k, work[k]]
                    if dynamic and nxt_claim < len(order):  # claim the next one when this one starts
                        queue[c].append(order[nxt_claim])
                        nxt_claim += 1
        busy = {c for c in ctas if cur[c] is not None}
        for c in busy:
            shared = any(o in busy for o in siblings[sm_of[c]] if o != c)
            cur[c][1] -= DT / (slowdown if shared else 1.0)
        now += DT
        for c in list(busy):
            k, rem = cur[c]
            if rem <= 0:
                cur[c] = None
                done += 1
                t = by[k]
                if t["w1"]:
                    w1_left[t["block"]] -= 1
                    if w1_left[t["block"]] == 0:
                        w1_done[t["block"]] = now
    return now


rows = ["| point | measured (call A) | model, fixed durations | model, per-SM rates |", "|---|---|---|---|"]
for label, path, T, measured in POINTS:
    point = [p for p in json.load(gzip.open(path))["models"][0]["points"] if p["tokens"] == T][0]
    ts, fill, dur, G = sim.prep(tt.point_tasks(point))
    same = collections.defaultdict(list)
    for t in ts:
        same[t["sm"]].append(t)
    sm_of = {t["cta"]: t["sm"] for t in ts}
    fixed = {}
    for dyn in (False, True):
        fixed[dyn] = (sim.run_lookahead(ts, fill, dur, G, 0.0) if dyn
                      else sim.run(ts, fill, dur, sim.static_rr(ts, G), G=G))
    work = {t["task"]: dur[t["task"]] * ((1 - f) + f / SLOWDOWN)
            for t in ts for f in [tt.sibling_cover(t, same[t["sm"]])]}
    rated = {dyn: replay(ts, fill, work, sm_of, dyn, SLOWDOWN) for dyn in (False, True)}
    rows.append(f"| {label} | {measured:+.1f} % | {100 * (fixed[True] / fixed[False] - 1):+.1f} % "
                f"({fixed[False] / 1e3:.0f} -> {fixed[True] / 1e3:.0f} µs) | "
                f"{100 * (rated[True] / rated[False] - 1):+.1f} % ({rated[False] / 1e3:.0f} -> {rated[True] / 1e3:.0f} µs) |")
text = ("# Dynamic claims at two CTAs per SM: the schedule model with per-SM rates (slowdown "
        f"{SLOWDOWN:.2f} with the SM sibling busy)\n\n" + "\n".join(rows) + "\n")
(here / "two_cta_model.md").write_text(text)
print(text)
