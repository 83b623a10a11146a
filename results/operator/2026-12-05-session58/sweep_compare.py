"""Session 58 call 2 against session 56's P = 1 sweep (both H200): gc-moe µs per point, its change, and the
serialised baseline's ratio. Run from results/operator/: python3 2026-12-05-session58/sweep_compare.py"""
import json
import statistics

NEW, OLD = "2026-12-05-session58/call-2-h200/bench", "2026-12-05-h200-session56/bench"


def points(path):
    r = json.load(open(f"{path}/results.json"))
    out = {}
    for p in r["models"][0]["points"]:
        us = {k: v.get("latency_us") for k, v in p["impls"].items()}
        out[p["T"]] = us
    return out, r["floor"]["read_bandwidth"][0]["gbps"]


for run in ("paper-glm-p1", "paper-dsv-p1", "paper-glm-p1-shared", "paper-dsv-p1-shared"):
    (new, bw_new), (old, bw_old) = points(f"{NEW}/{run}"), points(f"{OLD}/{run}")
    print(f"\n{run}: read {bw_old:.0f} -> {bw_new:.0f} GB/s")
    print("| T | s56 gc-moe | s58 gc-moe | change | s58 serial / gc-moe |")
    print("|---|---|---|---|---|")
    ch = []
    for t in sorted(new):
        a, b = old[t]["gc-moe"], new[t]["gc-moe"]
        ch.append(b / a - 1)
        print(f"| {t} | {a:.1f} | {b:.1f} | {100 * (b / a - 1):+.1f} % | {new[t]['gc-moe-serial'] / b:.3f} |")
    print(f"median change {100 * statistics.median(ch):+.1f} %")
