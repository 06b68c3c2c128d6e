#!/bin/bash
# s27 run C: the re-baseline with the corrected method (random inputs, L2 flush before each timed call):
# bench_prefill on the five issue-4 shapes, 3 passes, one pass of the old method (constant, no flush)
# beside it; the SDPA peer (flush), twice; bench_decode over both decode suites on random inputs.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $L/smi0.txt
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do
  timeout 120 ./bench_prefill --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_$pass.csv > $L/pf_$pass.log 2>&1; t "pf pass $pass rc=$?"
  if [ $pass = 2 ]; then
    timeout 120 ./bench_prefill --cases $C --reps 20 --selection random --kernels kv_outer --data constant --flush 0 --csv $OUT/pf_old.csv > $L/pf_old.log 2>&1; t "pf old method rc=$?"
  fi
done
for i in 1 2; do (cd ../bench && timeout 120 python3 sdpa_peer.py > $L/sdpa_$i.log 2>&1); t "sdpa $i rc=$?"; done
timeout 300 ./bench_decode --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --csv $OUT/decode.csv > $L/decode.log 2>&1; t "decode rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $L/smi1.txt
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    x=[]
    for i in (1,2,3):
      for r in csv.DictReader(open(f"{O}/pf_{i}.csv")):
        if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us','tflops')])
    old=[float(r['us']) for r in csv.DictReader(open(f"{O}/pf_old.csv")) if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt]
    print(case, fmt, ' '.join(f"{a[0]:.1f}" for a in x), f"med {st.median(a[0] for a in x):.1f} us {st.median(a[4] for a in x):.1f} TF/s ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.1f}/{st.median(a[3] for a in x):.1f}) old-method {old[0]:.1f}")
PY
cat $L/sdpa_1.log $L/sdpa_2.log
