#!/bin/bash
# s26 run E: a longer A/B of the warm-plan rule (new) against the session-25 HEAD build (base), and se (new plus
# the dispatch sort's first unit loaded before its class-count scan, FLASHMSA_PLAN_SORT_EARLY=1): test of se,
# then 8 interleaved passes x 20 replays on three cases.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_prefill_se > $L/test_se.log 2>&1; t "test_cuda_prefill_se rc=$? ok=$(grep -c 'OK \]' $L/test_se.log) $(grep 'FAILED  \]' $L/test_se.log | head -3 | tr '\n' ' ')"
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill_se --gtest_filter='*PlanShapes*:*TailUnits*' > $L/san_se.log 2>&1; t "memcheck se rc=$? $(grep 'ERROR SUMMARY' $L/san_se.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for pass in 1 2 3 4 5 6 7 8; do
  for v in base new se; do
    b=./bench_prefill; [ $v = base ] && b=./bench_prefill_base; [ $v = se ] && b=./bench_prefill_se
    timeout 90 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
  t "pass $pass"
done
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in ('16/1:8192:32768','16/1:8192:0','64/4:8192:32768'):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in ('base','new','se'):
      x=[]
      for i in range(1,9):
        for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
          if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
      med=[st.median(c) for c in zip(*x)]
      out.append(f"{v} {med[0]:7.1f} [{min(a[0] for a in x):.1f}-{max(a[0] for a in x):.1f}] ({med[1]:.1f}/{med[2]:.1f}/{med[3]:.1f})")
    print(case, fmt, ' | '.join(out))
PY
