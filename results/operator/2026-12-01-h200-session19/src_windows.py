"""Stall samples of an ncu --page source --csv dump (.csv.gz) in windows of W SASS lines, with the notable opcodes of
each window (where a kernel spends its warp time by code region): python3 src_windows.py FILE.csv.gz [W]."""
import gzip,csv,sys,collections,re
fn=sys.argv[1]; W=int(sys.argv[2]) if len(sys.argv)>2 else 40
rows=list(csv.reader(gzip.open(fn,'rt')))
his=[i for i,r in enumerate(rows) if r and r[0]=='Address']
h=rows[his[0]]
end=his[1] if len(his)>1 else len(rows)
data=[r for r in rows[his[0]+1:end] if len(r)==len(h)]
S=h.index('Warp Stall Sampling (All Samples)'); src=h.index('Source'); E=h.index('Instructions Executed')
tot=sum(float(r[S] or 0) for r in data)
key=re.compile(r'(QGMMA|LDGSTS|LDG|STG|BAR\.|ATOM|RED|CCTL|LDS|STS|MUFU|BRA|EXIT|RET|CALL|NANOSLEEP|ERRBAR|MEMBAR)')
for a in range(0,len(data),W):
    seg=data[a:a+W]; s=sum(float(r[S] or 0) for r in seg)
    ops=collections.Counter()
    for r in seg:
        m=key.search(r[src]); 
        if m: ops[m.group(1)]+=1
    exs=collections.Counter(r[E] for r in seg).most_common(2)
    print(f"{a:5d} {s/tot*100:5.1f}% ex={exs} "+' '.join(f'{k}{v}' for k,v in ops.items()))
