"""Stall samples of an ncu ``--page source --csv`` dump (.csv.gz) grouped by instruction class, inside the K loop
(instructions executed as often as the loop's QGMMAs) and outside it, with each class's top stall reasons:
``python3 src_classes.py FILE.csv.gz [FILE2 ...]``. Classes: the turn (``BAR.SYNC`` / ``BAR.ARV`` on a register),
wgmma issue (``WARPGROUP.ARRIVE``, ``QGMMA``), the wgmma wait (``WARPGROUP.DEPBAR``), stage waits (``SYNCS``),
shared loads, promote FMAs (``FFMA`` / ``FMUL``), the decode (``LOP3`` / ``PRMT`` / ``IMAD`` / ``SHF`` ...), other."""
import collections
import csv
import gzip
import sys


def classify(src: str) -> str:
    op = src.split()[1] if src.strip().startswith("@") else (src.split() or [""])[0]
    if op.startswith("BAR"):
        return "bar (turn / chunk)"
    if op.startswith("QGMMA") or src.strip().startswith("WARPGROUP.ARRIVE"):
        return "wgmma issue"
    if "WARPGROUP.DEPBAR" in src:
        return "wgmma wait"
    if op.startswith("SYNCS"):
        return "stage barrier"
    if op.startswith("LDS"):
        return "shared load"
    if op.startswith(("FFMA", "FMUL", "FADD")):
        return "promote (FFMA/FMUL)"
    if op.startswith(("LOP3", "PRMT", "IMAD", "SHF", "IADD3", "LEA", "VIADD", "SEL", "ISETP", "MOV")):
        return "decode / int"
    return "other"


def load(fn):
    rows = list(csv.reader(gzip.open(fn, "rt")))
    his = [i for i, r in enumerate(rows) if r and r[0] == "Address"]
    h = rows[his[0]]
    end = his[1] if len(his) > 1 else len(rows)
    data = [r for r in rows[his[0] + 1:end] if len(r) == len(h)]
    return h, data


def main(files):
    for fn in files:
        h, data = load(fn)
        S, src, E = h.index("Warp Stall Sampling (All Samples)"), h.index("Source"), h.index("Instructions Executed")
        reasons = [c for c in h if c.startswith("stall_") and "Not Issued" not in c]
        tot = sum(float(r[S] or 0) for r in data)
        loop_ex = collections.Counter(r[E] for r in data if "QGMMA" in r[src]).most_common(1)[0][0]
        groups = collections.defaultdict(lambda: [0.0, collections.Counter(), 0])
        for r in data:
            where = "loop" if r[E] == loop_ex else "outside"
            g = groups[(where, classify(r[src]))]
            g[0] += float(r[S] or 0)
            g[2] += 1
            for c in reasons:
                g[1][c[6:]] += float(r[h.index(c)] or 0)
        print(f"## {fn.split('/')[-1]}: {tot:.0f} samples, loop = instructions executed {loop_ex}x")
        for (where, cls), (s, rs, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
            if s / tot < 0.005:
                continue
            top = ", ".join(f"{k} {v / tot * 100:.1f}" for k, v in rs.most_common(3) if v)
            print(f"{where:8s} {cls:22s} {n:5d} instrs {s / tot * 100:5.1f} %   ({top})")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
