"""Call J: each staged-fold variant (_ppkf, _pp2kf) against its base (_ppk, _pp2k), both orders pooled: ratio of the
summed times. python3 pairs.py (from this folder)."""
import collections
import glob
import json
from pathlib import Path

res = collections.defaultdict(list)
for f in sorted(glob.glob(str(Path(__file__).resolve().parent / "json" / "bench_*.json"))):
    for r in json.load(open(f))["rows"]:
        res[(r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])].append((r["w1_us"], r["w2_us"]))
for (sh, v, m, bm), vals in sorted(res.items()):
    if v.endswith("f"):
        base = res[(sh, v[:-1], m, bm)]
        w1 = sum(x[0] for x in vals) / sum(x[0] for x in base) - 1
        w2 = sum(x[1] for x in vals) / sum(x[1] for x in base) - 1
        print(f"{sh:10s} {v:7s} m={m:3d} BM={bm:2d}  W1 {w1 * 100:+.1f} %  W2 {w2 * 100:+.1f} %")
