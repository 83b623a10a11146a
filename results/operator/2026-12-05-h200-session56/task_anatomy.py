"""A role2 task's cycles split into its steady K128 steps and its fixed parts, from session 55's stamped BM 64 kernels
(``../2026-12-05-h200-session55/call-a/stamps/h/``, ``stamp_role2.py``'s raw stamps gzipped, base form
``_ppksafwrc``):
per warpgroup the median task (first step's start to the next task's first step's start), the median steady step
period, and what the task would be without its fixed parts (steady period x steps per task).

    python3 results/operator/2026-12-05-h200-session56/task_anatomy.py
"""
import gzip
import json
import statistics
from pathlib import Path

STAMPS = Path(__file__).resolve().parents[1] / "2026-12-05-h200-session55" / "call-a" / "stamps" / "h"
POISON = -1


def cyc(a: int, b: int) -> int:
    d = (b - a) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 1 << 31 else d


def anatomy(path: Path) -> list[dict]:
    d = json.loads(gzip.decompress(path.read_bytes()))
    ev = {e: i for i, e in enumerate(d["events"])}
    spt = d["steps_per_task"]
    out = []
    for wg in (0, 1):
        steady, tasks, tail = [], [], []
        for cta in d["stamps"]:
            row = cta[wg]
            for gs in range(len(row) - 1):
                a, b = row[gs][ev["start"]], row[gs + 1][ev["start"]]
                if POISON in (a, b):
                    continue
                if (gs + 1) % spt == 0:  # a task's last step: its promote, the epilogue, the next task's top
                    if row[gs][ev["promoted"]] != POISON:
                        tail.append(cyc(row[gs][ev["promoted"]], b))
                elif gs % spt:
                    steady.append(cyc(a, b))
            for t0 in range(0, len(row) - spt, spt):
                a, b = row[t0][ev["start"]], row[t0 + spt][ev["start"]]
                if POISON not in (a, b):
                    tasks.append(cyc(a, b))
        task, step = statistics.median(tasks), statistics.median(steady)
        out.append({"wg": wg, "task": task, "step": step, "steps": spt, "tail": statistics.median(tail),
                    "steady_share": step * spt / task})
    return out


def main() -> None:
    print("| kernel | wg | task (cycles) | steady step | steps | last promote -> next task | steady x steps / task |")
    print("|---|---|---|---|---|---|---|")
    for f in sorted(STAMPS.glob("role2_w*_glm52_bm64_ppksafwrc_m64.json.gz")):
        for r in anatomy(f):
            print(f"| {f.name.split('.')[0]} | {r['wg']} | {r['task']:.0f} | {r['step']:.0f} | {r['steps']} | {r['tail']:.0f} | "
                  f"{100 * r['steady_share']:.1f} % |")


if __name__ == "__main__":
    main()
