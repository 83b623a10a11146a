"""Stall samples of an ncu --page source --csv dump (.csv.gz) per innermost MMA loop (a backward branch whose body
holds QGMMA and no other backward branch's body), in code order, plus the share outside them:
python3 src_loops.py FILE.csv.gz [...]. role2's ring kernel has two such loops per GEMM mode (W1 first, then W2 in the
consumer's task loop); the producer's and signal warp's loops hold no QGMMA."""
import csv
import gzip
import re
import sys

BRA = re.compile(r"BRA(?:\.\w+)*\s+(?:\w+,\s*)?(0x[0-9a-f]+)")


def loops(fn):
    rows = list(csv.reader(gzip.open(fn, "rt")))
    h0 = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    h = rows[h0]
    data = [r for r in rows[h0 + 1:] if len(r) == len(h) and r[0].startswith("0x")]
    S, src = h.index("Warp Stall Sampling (All Samples)"), h.index("Source")
    addr = {int(r[0], 16): i for i, r in enumerate(data)}
    spans = []
    for i, r in enumerate(data):
        m = BRA.search(r[src])
        if m and int(m.group(1), 16) in addr and addr[int(m.group(1), 16)] < i:
            spans.append((addr[int(m.group(1), 16)], i))
    mma = [(a, b) for a, b in spans if any("QGMMA" in data[k][src] for k in range(a, b + 1))]
    inner = [(a, b) for a, b in mma if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in mma)]
    tot = sum(float(r[S] or 0) for r in data)
    out = []
    for a, b in sorted(inner):
        s = sum(float(data[k][S] or 0) for k in range(a, b + 1))
        out.append((a, b, s / tot))
    return out, tot


if __name__ == "__main__":
    for fn in sys.argv[1:]:
        res, tot = loops(fn)
        inside = sum(x for _, _, x in res)
        print(f"{fn}: {tot:.0f} samples; " + ", ".join(f"loop {a}-{b} {x * 100:.1f} %" for a, b, x in res)
              + f"; outside the MMA loops {100 - inside * 100:.1f} %")
