from sim import *  # sim.py in this folder
import numpy as np, heapq
def makespan_greedy(us,ctas=132,c0=1.5,c1=2.2):
    n=len(us); heap=[(0.0,b) for b in range(ctas)]; nxt=0; fin=np.zeros(ctas)
    heapq.heapify(heap)
    while nxt<n:
        t,b=heapq.heappop(heap); t+=c0+c1*us[nxt]; nxt+=1; fin[b]=t; heapq.heappush(heap,(t,b))
    return fin.max(),fin.mean()
rng=np.random.default_rng(1); cnt=rows_entries(8192,32768,rng)
for tpu in [32]:
    for tail in [0,2,4,6,8]:
        us=units(cnt,tpu,8,tail,True)
        print(tpu,tail,len(us),"lookahead %.1f mean %.1f"%makespan(us)[:2],"greedy %.1f mean %.1f"%makespan_greedy(us))
