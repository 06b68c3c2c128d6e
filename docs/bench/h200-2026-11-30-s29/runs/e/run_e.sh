#!/bin/bash
# s29 run E: the combine's partial loads (timing variants): z1 ld.global.nc.L1::no_allocate, z2 the same with L2::256B prefetch, z3 L1::evict_first; new = HEAD rebuilt.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
V="base new z1 z2 z3"
for pass in 1 2; do
  for v in $V; do
    b=./bench_prefill_$v; [ $v = base ] && b=./bench_prefill
    timeout 120 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench"
V="$V" C="$C" python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']; V=os.environ['V'].split()
for case in os.environ['C'].split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in V:
      x=[]
      for i in (1,2):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','attention_us','combine_us')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.0f}/{st.median(a[2] for a in x):.0f})")
    print(case, fmt, ' | '.join(out))
PY
