"""Session 60's kernel-alone A/Bs (s60-b, `call-1-h100/json/t64e-ab{1..4}.json`; s60-d, `call-4-h100/json/
t64e-h-ab{1..4}.json`, with the weight-stage forms): per shape, GEMM and variant the
median time over the four alternating runs, the change against ``_ppksafwr`` (the shipped BM 64 mirror) — the median
of the per-run ratios, each run timing every arm back to back — and the share of the run's streaming read.

    python3 results/operator/2026-12-05-session60/ab_table.py results/operator/2026-12-05-session60/call-1-h100/json
"""
import json
import statistics
import sys
from pathlib import Path

BASE = "_ppksafwr"
ORDER = ("_ppksafwr", "_ppksafwre", "_ppksafr", "_ppksafre", "_ppksafwr7", "_ppksafwr6", "_ppksafwre6")


def main(folder):
    runs = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("t64e-*ab*.json"))]
    print(f"{len(runs)} runs, {runs[0]['gpu']}, streaming read {min(r['stream_read_Bps'] for r in runs) / 1e12:.2f}-"
          f"{max(r['stream_read_Bps'] for r in runs) / 1e12:.2f} TB/s\n")
    print("| shape | GEMM | variant | median µs | vs _ppksafwr (median of per-run ratios, range) | share of read |")
    print("|---|---|---|---|---|---|")
    shapes = sorted({row["shape"] for r in runs for row in r["rows"]})
    for shape in shapes:
        for g in ("w1", "w2"):
            for v in ORDER:
                times, ratios, shares = [], [], []
                for r in runs:
                    rows = {row["variant"]: row for row in r["rows"] if row["shape"] == shape}
                    if v not in rows:
                        continue
                    times.append(rows[v][f"{g}_us"])
                    ratios.append(rows[v][f"{g}_us"] / rows[BASE][f"{g}_us"] - 1)
                    shares.append(rows[v][f"{g}_frac_bw"])
                if not times:
                    continue
                rel = "—" if v == BASE else (f"{100 * statistics.median(ratios):+.1f} % "
                                              f"({100 * min(ratios):+.1f}..{100 * max(ratios):+.1f})")
                print(f"| {shape} | {g.upper()} | `{v}` | {statistics.median(times):.1f} | {rel} | "
                      f"{100 * statistics.median(shares):.1f} % |")


if __name__ == "__main__":
    main(sys.argv[1])
