from sim import *  # sim.py in this folder
import numpy as np
def units_bal(cnt,tpu,qpt,tail,split_rows):
    us=[]
    for n in cnt:
        if n==0: continue
        tiles=(n+qpt-1)//qpt; k=(tiles+tpu-1)//tpu
        base=tiles//k; extra=tiles-base*k
        sizes=[base+1]*extra+[base]*(k-extra)
        if split_rows and tail>0 and sizes[-1]>tail:
            sizes[-1]-=tail; sizes.append(tail)
        us+=sizes
    return sorted(us,reverse=True)
import sys
q_len,prefix=int(sys.argv[1]),int(sys.argv[2])
for seed in [1,2]:
    rng=np.random.default_rng(seed)
    cnt=rows_entries(q_len,prefix,rng); N=len(cnt); split=132<=N<=396
    for tpu in [24,28,32,36,40,48,64]:
        a=makespan(units(cnt,tpu,8,4,split)); b=makespan(units_bal(cnt,tpu,8,4,split))
        print(f"seed {seed} tpu {tpu:2d} cur {a[0]:6.1f} (mean {a[1]:6.1f})  balanced {b[0]:6.1f} (mean {b[1]:6.1f}) units {len(units_bal(cnt,tpu,8,4,split))}")
