"""Layer A/B from bench sweep folders: per (model, T) the gc-moe latency of each run and the change of the means.

    python3 layer_ab.py OLD_DIR[,OLD_DIR2] NEW_DIR[,NEW_DIR2]     (e.g. call-f/bench/ab-main,call-f/bench/ab-mainb ...)
"""
import json,sys
def load(d):
    out={}
    for mv in json.load(open(f'{d}/results.json'))['models']:
        for p in mv['points']:
            g=p['impls'].get('gc-moe',{})
            if g.get('status')=='ok': out[(mv['shape']['name'],p['T'])]=g['latency_us']
    return out
old=[load(d) for d in sys.argv[1].split(',')]; new=[load(d) for d in sys.argv[2].split(',')]
keys=sorted(set(old[0])&set(new[0]))
for k in keys:
    o=[x[k] for x in old if k in x]; n=[x[k] for x in new if k in x]
    mo=sum(o)/len(o); mn=sum(n)/len(n)
    print(f'{k[0]:20} T={k[1]:4}  old {" ".join(f"{v:7.1f}" for v in o)}  new {" ".join(f"{v:7.1f}" for v in n)}  {(mn/mo-1)*100:+5.1f}%')
