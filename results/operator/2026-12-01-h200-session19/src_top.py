"""Top stall-sampled SASS instructions of the first kernel in an ncu --page source --csv dump (.csv.gz):
python3 src_top.py FILE.csv.gz [N]."""
import gzip,csv,sys
fn=sys.argv[1]
rows=list(csv.reader(gzip.open(fn,'rt')))
his=[i for i,r in enumerate(rows) if r and r[0]=='Address']
print('sections',len(his))
h=rows[his[0]]
end=his[1] if len(his)>1 else len(rows)
data=[r for r in rows[his[0]+1:end] if len(r)==len(h)]
S=h.index('Warp Stall Sampling (All Samples)'); src=h.index('Source'); E=h.index('Instructions Executed')
reasons=[c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
tot=sum(float(r[S] or 0) for r in data)
print('instrs',len(data),'samples',tot)
# cumulative by chunks of 1/20 of code
n=len(data)
ordered=sorted(range(n),key=lambda i:-float(data[i][S] or 0))
for i in ordered[:int(sys.argv[2]) if len(sys.argv)>2 else 40]:
    r=data[i]; rs=sorted(((float(r[h.index(c)] or 0),c[6:]) for c in reasons),reverse=True)[:2]
    print(f"{i:5d} {float(r[S] or 0)/tot*100:5.1f}% ex={r[E]:>6} {r[src][:60]:60s} {rs[0][1]}={rs[0][0]:.0f} {rs[1][1]}={rs[1][0]:.0f}")
