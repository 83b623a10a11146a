"""Pool two alternating bench_role2 runs per pair of variants and print new vs old per shape / m (session 13)."""
import json, sys
from collections import defaultdict
d = defaultdict(list)
files, new_sfx, old_sfx = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
for f in files:
    for r in json.load(open(f))["rows"]:
        d[(r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])].append((r["w1_us"], r["w2_us"]))
for (sh, v, m, bm), vals in sorted(d.items()):
    if v.endswith(new_sfx):
        o = d[(sh, v[:-len(new_sfx)] + old_sfx, m, bm)]
        mean = lambda xs, i: sum(x[i] for x in xs) / len(xs)
        print(f"{sh:11} {v:7} m={m:3} BM={bm:3} W1 {mean(o,0):6.1f}->{mean(vals,0):6.1f} {100*(mean(vals,0)/mean(o,0)-1):+5.1f}%"
              f"  W2 {mean(o,1):6.1f}->{mean(vals,1):6.1f} {100*(mean(vals,1)/mean(o,1)-1):+5.1f}%")
