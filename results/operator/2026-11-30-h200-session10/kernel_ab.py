"""Kernel-alone A/B of two bench_role2 JSON pairs (old a/b, new a/b): per (shape, variant, m) the W1/W2 times of
each run, the change of the sums, and the new builds' fraction of the same-run read bandwidth.

    python3 kernel_ab.py OLD_A.json,OLD_B.json NEW_A.json,NEW_B.json
"""
import json, sys


def load(f):
    d = json.load(open(f))
    return d['stream_read_Bps'], {(r['shape'], r['variant'], r['tokens_per_expert']): r for r in d['rows']}


bo = [load(f) for f in sys.argv[1].split(',')]
bn = [load(f) for f in sys.argv[2].split(',')]
print('read bw TB/s: old', [round(b[0] / 1e12, 2) for b in bo], 'new', [round(b[0] / 1e12, 2) for b in bn])
print(f"{'shape':10s} {'var':5s} {'m':>3s} | {'W1 old':>13s} {'W1 new':>13s}    d% | {'W2 old':>13s} {'W2 new':>13s}    d%"
      " | new %bw W1 W2")
for k in bn[0][1]:
    n1 = [b[1][k]['w1_us'] for b in bn]; n2 = [b[1][k]['w2_us'] for b in bn]
    fb = bn[0][1][k]
    tail = f" | {100 * fb['w1_frac_bw']:5.1f} {100 * fb['w2_frac_bw']:5.1f}"
    if k not in bo[0][1]:
        print(f"{k[0]:10s} {k[1]:5s} {k[2]:3d} | {'':13s} {n1[0]:6.1f} {n1[-1]:6.1f} {'':5s} | {'':13s} "
              f"{n2[0]:6.1f} {n2[-1]:6.1f} {'':5s}" + tail)
        continue
    o1 = [b[1][k]['w1_us'] for b in bo]; o2 = [b[1][k]['w2_us'] for b in bo]
    d1 = (sum(n1) / sum(o1) - 1) * 100; d2 = (sum(n2) / sum(o2) - 1) * 100
    print(f"{k[0]:10s} {k[1]:5s} {k[2]:3d} | {o1[0]:6.1f} {o1[-1]:6.1f} {n1[0]:6.1f} {n1[-1]:6.1f} {d1:+5.1f} | "
          f"{o2[0]:6.1f} {o2[-1]:6.1f} {n2[0]:6.1f} {n2[-1]:6.1f} {d2:+5.1f}" + tail)
