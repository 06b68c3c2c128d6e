import csv,sys,collections
def load(f):
    d={}
    for r in csv.DictReader(open(f)):
        d[(r['case'],r['hq']+'/'+r['hkv'])]=float(r['us'])
    return d
base=load(sys.argv[1])
others=[(f,load(f)) for f in sys.argv[2:]]
print("%-18s %-5s %9s"%("case","heads",sys.argv[1].split('/')[-1][:9]) + "".join("%12s"%f.split('/')[-1][:11] for f,_ in others))
for k in base:
    print("%-18s %-5s %9.1f"%(k[0],k[1],base[k]) + "".join("%7.1f %4.2f"%(o[k],base[k]/o[k]) if k in o else "   -" for f,o in others))
