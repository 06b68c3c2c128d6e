import csv,sys
def load(f):
    d={}
    for r in csv.DictReader(open(f)):
        d[(r['hq'],r['format'],r['case'])]=r
    return d
a=load(sys.argv[1]); b=load(sys.argv[2])
for k in sorted(a):
    ra=a[k]; rb=b.get(k)
    if ra['kernel']!='tile': continue
    print('%-3s %-6s %-16s sp=%s  ws %8.1f us %.3f TB/s | serial %8.1f %.3f | %.2fx'%(k[0],k[1],k[2],ra['splits'],float(ra['us']),float(ra['tb_s']),float(rb['us']),float(rb['tb_s']),float(rb['us'])/float(ra['us'])))
