"""Kernel-alone A/B from bench_role2.py JSON files: mean W1 / W2 time per (shape, tokens per expert) of variant pairs.

    python3 kernel_ab.py _p:_pd,_p2:_p2d call-c1/json/bench_role2_a.json call-c1/json/bench_role2_b.json
"""
import json,collections,sys
rows=collections.defaultdict(list)
for fn in sys.argv[2:]:
    d=json.load(open(fn))
    for r in d['rows']:
        rows[(r['shape'],r['tokens_per_expert'],r['variant'])].append((r['w1_us'],r['w2_us']))
pairs=[tuple(p.split(':')) for p in sys.argv[1].split(',')]
for (sh,m,v),o in sorted(rows.items()):
    for a,b in pairs:
        if v!=a: continue
        n=rows.get((sh,m,b))
        if not n: continue
        w1o=sum(x[0] for x in o)/len(o); w1n=sum(x[0] for x in n)/len(n)
        w2o=sum(x[1] for x in o)/len(o); w2n=sum(x[1] for x in n)/len(n)
        print(f'{sh:10} m={m:3} {a:4}->{b:5} W1 {w1o:6.1f}->{w1n:6.1f} ({(w1n/w1o-1)*100:+5.1f}%)  W2 {w2o:6.1f}->{w2n:6.1f} ({(w2n/w2o-1)*100:+5.1f}%)  W1 runs {[round(x[0]) for x in o]} {[round(x[0]) for x in n]} W2 runs {[round(x[1]) for x in o]} {[round(x[1]) for x in n]}')
