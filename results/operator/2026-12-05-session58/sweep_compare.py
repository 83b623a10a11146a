"""Session 58's P = 1 sweep tables. Run from results/operator/: python3 2026-12-05-session58/sweep_compare.py

1. Call 2 (H200, the shipped kernels) against session 56's sweep (H200, another lease): gc-moe µs per point, the
   change, and the serialised baseline (a)'s ratio.
2. Call 3 (H100, one lease): A S S A of session 56's GLM-5.2 bundle (A, before session 57's scale hoist) and the
   shipped one (S), routed (r) and + shared (h)."""
import gzip
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
NEW, OLD, AB = HERE / "call-2-h200/bench", HERE.parent / "2026-12-05-h200-session56/bench", HERE / "call-3-h100/bench"


def load(run_dir: Path):
    for name, opener in (("results.json", open), ("results.json.gz", gzip.open)):
        if (run_dir / name).exists():
            with opener(run_dir / name, "rt") as f:
                return json.load(f)
    raise FileNotFoundError(run_dir)


def latencies(run_dir: Path, impl: str = "gc-moe"):
    return {p["T"]: p["impls"][impl]["latency_us"] for p in load(run_dir)["models"][0]["points"]}


def sweep_table():
    for run in ("paper-glm-p1", "paper-dsv-p1", "paper-glm-p1-shared", "paper-dsv-p1-shared"):
        new, old, serial = latencies(NEW / run), latencies(OLD / run), latencies(NEW / run, "gc-moe-serial")
        reads = [load(d / run)["floor"]["read_bandwidth"][0]["gbps"] for d in (OLD, NEW)]
        print(f"\n{run}: streaming read {reads[0]:.0f} (session 56) -> {reads[1]:.0f} GB/s")
        print("| T | s56 gc-moe | s58 gc-moe | change | s58 serial / gc-moe |")
        print("|---|---|---|---|---|")
        for t in sorted(new):
            print(f"| {t} | {old[t]:.1f} | {new[t]:.1f} | {100 * (new[t] / old[t] - 1):+.1f} % | "
                  f"{serial[t] / new[t]:.3f} |")
        print(f"median change {100 * statistics.median(new[t] / old[t] - 1 for t in new):+.1f} %")


def ab_table():
    for kind, label in (("r", "routed"), ("h", "+ shared")):
        a1, s2, s3, a4 = (latencies(AB / f"{kind}-{arm}") for arm in ("A-1", "S-2", "S-3", "A-4"))
        print(f"\nGLM-5.2 {label}, A S S A (H100)")
        print("| T | A µs | S µs | S - A |")
        print("|---|---|---|---|")
        for t in sorted(a1):
            a, s = (a1[t] + a4[t]) / 2, (s2[t] + s3[t]) / 2
            print(f"| {t} | {a1[t]:.1f}, {a4[t]:.1f} | {s2[t]:.1f}, {s3[t]:.1f} | {100 * (s / a - 1):+.2f} % |")


if __name__ == "__main__":
    sweep_table()
    ab_table()
