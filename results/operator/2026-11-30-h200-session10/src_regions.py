import gzip,csv,sys,collections
fn=sys.argv[1]
rows=list(csv.reader(gzip.open(fn,'rt')))
hi=[i for i,r in enumerate(rows) if r and r[0]=='Address'][0]
h=rows[hi]; data=[r for r in rows[hi+1:] if len(r)==len(h)]
S=h.index('Warp Stall Sampling (All Samples)'); src=h.index('Source'); E=h.index('Instructions Executed')
reasons=[c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
tot=sum(float(r[S] or 0) for r in data)
q=[i for i,r in enumerate(data) if 'QGMMA' in r[src]]
# loop = instructions with the mainloop's exec count (most common count among QGMMAs' neighbours)
ex=collections.Counter(data[i][E] for i in q); lc=ex.most_common(1)[0][0]
idx=[i for i,r in enumerate(data) if r[E]==lc]
lo,hi_=min(idx),max(idx)
def summ(a,b,name):
    seg=data[a:b+1]; s=sum(float(r[S] or 0) for r in seg)
    rt=collections.Counter()
    for r in seg:
        for c in reasons: rt[c[6:]]+=float(r[h.index(c)] or 0)
    ops=collections.Counter((r[src].split()[1] if r[src].strip().startswith('@') else r[src].split()[0]).split('.')[0] for r in seg if r[src].strip() and r[E]==lc)
    print(f'{name}: [{a},{b}] {s/tot*100:.1f}% of samples; '+' '.join(f'{k}={v/tot*100:.1f}' for k,v in rt.most_common(8)))
    print('   ops/iter:', sum(ops.values()), ' '.join(f'{k}{v}' for k,v in ops.most_common(14)))
print(fn,'loop exec count',lc,'total',tot)
summ(lo,hi_,'mainloop')
summ(0,lo-1,'before'); summ(hi_+1,len(data)-1,'after')
