"""Replay a recorded role2 task trace under other task->CTA assignments (measured task durations, block fill times
from the trace, W2 waits for its block's W1 tasks)."""
import gzip, json, collections, sys, heapq
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root
from gcmoe_runtime.bench import task_trace as tt

def load(path, T):
    d = json.load(gzip.open(path))
    p = [p for p in d["models"][0]["points"] if p["tokens"] == T][0]
    return tt.point_tasks(p)

def prep(ts):
    ts = sorted(ts, key=lambda t: t["task"])
    fill = {}
    for t in ts:
        if t["w1"]:
            fill[t["block"]] = min(fill.get(t["block"], 1e18), t["ready"])
    dur = {t["task"]: t["end"] - t["start"] for t in ts}
    G = len({t["cta"] for t in ts})
    return ts, fill, dur, G

def run(ts, fill, dur, owner_lists=None, dynamic=False, G=128, gap=0.0):
    """owner_lists: cta -> [task...] in order; dynamic: claim in order by the first free CTA."""
    by = {t["task"]: t for t in ts}
    w1_left = collections.Counter(t["block"] for t in ts if t["w1"])
    w1_done = {}
    free = [0.0] * G
    if dynamic:
        order = [t["task"] for t in ts]
        # tasks in order to the CTA free first (claims are in increasing order; a CTA claims when its previous task ends)
        heap = [(0.0, c) for c in range(G)]
        heapq.heapify(heap)
        for k in order:
            t = by[k]
            f, c = heapq.heappop(heap)
            ready = fill[t["block"]] if t["w1"] else w1_done[t["block"]]
            s = max(f, ready)
            e = s + dur[k] + gap
            if t["w1"]:
                w1_left[t["block"]] -= 1
                if not w1_left[t["block"]]:
                    w1_done[t["block"]] = max(w1_done.get(t["block"], 0), e)
                else:
                    w1_done[t["block"]] = max(w1_done.get(t["block"], 0), e)
            heapq.heappush(heap, (e, c))
            free[c] = e
        return max(free)
    # static: process in global task order (each task's deps are earlier)
    own = {k: c for c, l in owner_lists.items() for k in l}
    done_b = collections.defaultdict(float)
    for t in ts:
        k = t["task"]; c = own[k]
        ready = fill[t["block"]] if t["w1"] else done_b[("w1", t["block"])]
        s = max(free[c], ready)
        e = s + dur[k] + gap
        free[c] = e
        if t["w1"]:
            done_b[("w1", t["block"])] = max(done_b[("w1", t["block"])], e)
    return max(free)

def static_rr(ts, G):
    d = collections.defaultdict(list)
    for i, t in enumerate(sorted(ts, key=lambda t: t["task"])):
        d[t["task"] % G].append(t["task"])
    return d

def static_balanced(ts, G, w):
    """one generation: W1 round robin; W2 first fills the CTAs without an extra W1 (w rounds), then round robin"""
    ts = sorted(ts, key=lambda t: t["task"])
    w1 = [t["task"] for t in ts if t["w1"]]; w2 = [t["task"] for t in ts if not t["w1"]]
    n1, n2 = len(w1), len(w2)
    r1 = n1 % G
    d = collections.defaultdict(list)
    for i, k in enumerate(w1):
        d[i % G].append(k)
    m = G - r1
    F = min(n2, w * m) if r1 else 0
    for v, k in enumerate(w2):
        c = r1 + v % m if v < F else (v - F) % G
        d[c].append(k)
    return d

if __name__ == "__main__":
    for path, T, w in [(a, int(b), int(c)) for a, b, c in (x.split(",") for x in sys.argv[1:])]:
        ts = load(path, T)
        ts, fill, dur, G = prep(ts)
        span = max(t["end"] for t in ts) - min(t["claim"] for t in ts)
        gaps = []
        byc = collections.defaultdict(list)
        for t in ts: byc[t["cta"]].append(t)
        for l in byc.values():
            l.sort(key=lambda t: t["start"])
            gaps += [b["start"] - a["end"] for a, b in zip(l, l[1:]) if b["start"] - a["end"] < 5000]
        gap = sorted(gaps)[len(gaps)//2] if gaps else 0
        rr = run(ts, fill, dur, static_rr(ts, G), G=G, gap=gap)
        bal = run(ts, fill, dur, static_balanced(ts, G, w), G=G, gap=gap)
        dyn = run(ts, fill, dur, dynamic=True, G=G, gap=gap)
        print(f"{path.split('/')[-2]} T={T}: measured span {span/1e3:.1f}  model: rr {rr/1e3:.1f}  balanced {bal/1e3:.1f} ({100*(bal/rr-1):+.1f} %)  dynamic {dyn/1e3:.1f} ({100*(dyn/rr-1):+.1f} %)  gap {gap/1e3:.2f}")

def run_lookahead(ts, fill, dur, G, gap):
    """dynamic claims one task ahead: a CTA claims its next task when it starts its current one"""
    return run_fixed_count(ts, fill, dur, G, gap, quota=[len(ts)] * G)

def run_fixed_count(ts, fill, dur, G, gap, lookahead=True, quota=None):
    """dynamic identity, static counts: CTA c claims exactly its static count of tasks (c < ntasks % G: one more);
    with ``quota``, those counts instead"""
    by = sorted(ts, key=lambda t: t["task"])
    n = len(by)
    quota = list(quota) if quota is not None else [n // G + (c < n % G) for c in range(G)]
    w1_done = collections.defaultdict(float)
    prev_end = [0.0] * G
    heap = [(0.0, c) for c in range(G) if quota[c] > 0]
    heapq.heapify(heap)
    for t in by:
        claim, c = heapq.heappop(heap)
        ready = fill[t["block"]] if t["w1"] else w1_done[t["block"]]
        s = max(prev_end[c], ready, claim)
        e = s + dur[t["task"]] + gap
        prev_end[c] = e
        if t["w1"]:
            w1_done[t["block"]] = max(w1_done[t["block"]], e)
        quota[c] -= 1
        if quota[c] > 0:
            heapq.heappush(heap, (s if lookahead else e, c))
    return max(prev_end)
