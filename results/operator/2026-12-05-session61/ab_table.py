"""Session 61's kernel-alone A/B (s61-bc, `call-1-h100/json/t64f-ab{1..6}.json`): per shape, token point, GEMM and
variant the median time over the six alternating runs, the change against a base arm — the median of the per-run
ratios (each run times every arm back to back) with their range — and the share of the run's streaming read. Arms:
``_ppksafwr`` (no epilogue warpgroup), ``_ppksafwreo`` (session 60's epilogue warpgroup, shipped), ``_ppksafwre``
(session 61's: W1's values computed once, bytes staged as words).

    python3 results/operator/2026-12-05-session61/ab_table.py results/operator/2026-12-05-session61/call-1-h100/json

Other sessions' A/Bs: ``ab_table.py FOLDER GLOB ARMS BASES`` (ARMS / BASES comma-separated, in table order), e.g.
session 62's ``... call-1-h100/json 't64c-ab*.json' _ppksafwr,_ppksafwre,_ppksafwreb _ppksafwre,_ppksafwr``.
"""
import json
import statistics
import sys
from pathlib import Path

ORDER = ("_ppksafwr", "_ppksafwreo", "_ppksafwre")


def table(runs, base, order=ORDER):
    out = [f"| shape | tokens / expert | GEMM | variant | median µs | vs `{base}` (median of per-run ratios, range) | "
           "share of read |", "|---|---|---|---|---|---|---|"]
    keys = sorted({(row["shape"], row["tokens_per_expert"]) for r in runs for row in r["rows"]},
                  key=lambda k: (k[0], -k[1]))
    for shape, tpe in keys:
        for g in ("w1", "w2"):
            for v in order:
                times, ratios, shares = [], [], []
                for r in runs:
                    rows = {row["variant"]: row for row in r["rows"]
                            if (row["shape"], row["tokens_per_expert"]) == (shape, tpe)}
                    if v not in rows or base not in rows:
                        continue
                    times.append(rows[v][f"{g}_us"])
                    ratios.append(rows[v][f"{g}_us"] / rows[base][f"{g}_us"] - 1)
                    shares.append(rows[v][f"{g}_frac_bw"])
                if not times:
                    continue
                rel = "—" if v == base else (f"{100 * statistics.median(ratios):+.1f} % "
                                             f"({100 * min(ratios):+.1f}..{100 * max(ratios):+.1f})")
                out.append(f"| {shape} | {tpe} | {g.upper()} | `{v}` | {statistics.median(times):.1f} | {rel} | "
                           f"{100 * statistics.median(shares):.1f} % |")
    return out


def main(folder, pattern="t64[fg]-ab*.json", order=ORDER, bases=("_ppksafwreo", "_ppksafwr")):
    runs = [json.loads(p.read_text()) for p in sorted(Path(folder).glob(pattern))]
    print(f"{len(runs)} runs, {runs[0]['gpu']}, streaming read {min(r['stream_read_Bps'] for r in runs) / 1e12:.2f}-"
          f"{max(r['stream_read_Bps'] for r in runs) / 1e12:.2f} TB/s\n")
    for base in bases:
        print("\n".join(table(runs, base, order)) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 5:
        main(sys.argv[1], sys.argv[2], tuple(sys.argv[3].split(",")), tuple(sys.argv[4].split(",")))
    else:
        main(sys.argv[1])
