# Simulation of the prefill attention kernel's dynamic unit schedule (session 25): entries per
# CSR row from the bench's random selection, units (tpu, tail split), LPT dispatch order,
# 132 CTAs, a CTA's first two units static, the (k+2)-th taken at the start of unit k's last tile.
import numpy as np, heapq, sys
def rows_entries(q_len, prefix, rng):
    T=q_len; pages=(prefix+q_len+127)//128
    cnt=np.zeros(pages,dtype=np.int64)
    for j in range(T):
        pos=prefix+j; local=pos//128; nh=min(local,15)
        if nh>0:
            pick=rng.choice(local,size=nh,replace=False)
            np.add.at(cnt,pick,1)
        cnt[local]+=1
    return cnt
def units(cnt,tpu,qpt,tail,split_rows):
    us=[]
    for r,n in enumerate(cnt):
        if n==0: continue
        tiles=(n+qpt-1)//qpt; full=tiles//tpu; rem=tiles-full*tpu
        us+= [tpu]*full
        if rem:
            if split_rows and tail>0 and rem>tail: us+=[rem-tail,tail]
            else: us+=[rem]
    return sorted(us,reverse=True)
def makespan(us,ctas=132,c0=1.5,c1=2.2):
    # event simulation: each CTA runs units; ticket for unit k+2 taken at start of unit k's last tile
    n=len(us); nxt=0
    # static: unit b and b+ctas
    q=[]  # (time when CTA needs to know... ) simpler: each CTA has a queue of owned units
    owned=[[] for _ in range(ctas)]
    for b in range(ctas):
        if b<n: owned[b].append(b)
        if b+ctas<n: owned[b].append(b+ctas)
    ticket=2*ctas
    # events: (time, cta) = time when CTA starts the last tile of its current unit -> takes ticket
    t=np.zeros(ctas); heap=[]
    cur=[None]*ctas
    for b in range(ctas):
        if owned[b]:
            u=owned[b].pop(0); cur[b]=(u,0.0)
            dur=c0+c1*us[u]
            heapq.heappush(heap,(dur-c1,'tk',b)); heapq.heappush(heap,(dur,'end',b))
    finish=np.zeros(ctas)
    while heap:
        tm,kind,b=heapq.heappop(heap)
        if kind=='tk':
            if owned[b] or True:
                if ticket<n: owned[b].append(ticket); ticket+=1
        else:
            finish[b]=tm
            if owned[b]:
                u=owned[b].pop(0); dur=c0+c1*us[u]
                heapq.heappush(heap,(tm+dur-c1,'tk',b)); heapq.heappush(heap,(tm+dur,'end',b))
    return finish.max(), finish.mean(), finish.min()
if __name__=='__main__':
    q_len,prefix=int(sys.argv[1]),int(sys.argv[2])
    rng=np.random.default_rng(1)
    cnt=rows_entries(q_len,prefix,rng)
    N=len(cnt)
    split = 132<=N<=396
    for tpu in [24,26,28,30,32,34,36,40,48]:
        for tail in [4]:
            us=units(cnt,tpu,8,tail,split)
            mk,mean,mn=makespan(us)
            print(f"tpu {tpu:2d} units {len(us):4d} makespan {mk:7.1f} mean {mean:7.1f} min {mn:7.1f} tiles/CTA {sum(us)/132:.1f}")
