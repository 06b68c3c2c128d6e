#!/bin/bash
# s27 run A: what the benchmark method does to the numbers. bench_prefill at HEAD's library with
# --data constant|random x --flush 0|1 (sessions 1-26: constant, no flush), 2 interleaved passes;
# the SDPA peer with and without the flush; bench_decode constant vs random on six batch >= 32 cases.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/smi0.txt
C=16/1:8192:32768,64/4:8192:32768,16/1:16384:114688
for pass in 1 2; do
  for d in constant random; do for f in 0 1; do
    timeout 120 ./bench_prefill --cases $C --reps 20 --selection random --kernels kv_outer --data $d --flush $f --csv $OUT/pf_${d}_f${f}_$pass.csv > $L/pf_${d}_f${f}_$pass.log 2>&1
    t "pf $d flush=$f pass $pass rc=$?"
  done; done
done
for f in 0 1; do (cd ../bench && timeout 120 python3 sdpa_peer.py --flush $f > $L/sdpa_f$f.log 2>&1); t "sdpa flush=$f rc=$? $(head -1 $L/sdpa_f$f.log)"; done
DC=b32_s50000_q8,b64_s100000_q8,b128_s200000_q8,b32_s10000_q8,b64_s10000_q8,b128_s10000_q8
for d in constant random; do
  timeout 150 ./bench_decode --suite full --cases $DC --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --data $d --csv $OUT/dec_$d.csv > $L/dec_$d.log 2>&1
  t "decode $d rc=$?"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/smi1.txt
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in "16/1:8192:32768,64/4:8192:32768,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for d in ('constant','random'):
      for f in (0,1):
        x=[]
        for i in (1,2):
          for r in csv.DictReader(open(f"{O}/pf_{d}_f{f}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us','tflops')])
        out.append(f"{d[0]}{f} {min(a[0] for a in x):.1f}-{max(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.1f}/{st.median(a[3] for a in x):.1f})")
    print(case, fmt, ' | '.join(out))
rows={}
for d in ('constant','random'):
  for r in csv.DictReader(open(f"{O}/dec_{d}.csv")): rows.setdefault((r['case'],r['format'],r['hq']),{})[d]=float(r['us'])
for k,v in sorted(rows.items()): print('dec',*k, ' '.join(f"{d}={v.get(d,0):.1f}" for d in ('constant','random')), f"ratio={v.get('random',0)/max(v.get('constant',1),1e-9):.3f}")
PY
