"""Group ncu SourceCounters warp-stall samples (--page source --csv) into bins of consecutive SASS instructions and
print each bin's share of all samples with its notable opcodes (how call B located the activation staging).

    python3 stall_regions.py call-b/json/ncu_src_w1_bm32.csv.gz [BIN=40]
"""
import gzip
import csv,sys,collections
fn=sys.argv[1]
rows=list(csv.reader((gzip.open if fn.endswith('.gz') else open)(fn, 'rt')))
hi=[i for i,r in enumerate(rows) if r and r[0]=='Address'][0]
h=rows[hi]; data=[r for r in rows[hi+1:] if len(r)==len(h)]
S=h.index('Warp Stall Sampling (All Samples)'); src=h.index('Source'); E=h.index('Instructions Executed')
tot=sum(float(r[S] or 0) for r in data)
B=int(sys.argv[2]) if len(sys.argv)>2 else 40
for b0 in range(0,len(data),B):
    seg=data[b0:b0+B]
    s=sum(float(r[S] or 0) for r in seg)
    ex=sum(float(r[E] or 0) for r in seg)
    ops=collections.Counter(r[src].split()[0] if not r[src].strip().startswith('@') else r[src].split()[1] for r in seg if r[src].strip())
    key=[o for o in ('LDG','STS','BAR','QGMMA','SYNCS','PRMT','FFMA','STG','ST','LDS','SHFL','MUFU','RET','EXIT','REDUX','F2FP','ATOMG','WARPGROUP') if o in ''.join(ops)]
    if s/tot>0.004: print(f'{b0:5d}-{b0+B-1:5d} {s/tot*100:5.1f}%  exec {ex:9.0f}  {" ".join(f"{o}{ops[o]}" for o in ops if any(o.startswith(k) for k in key))}')
