#!/bin/bash
# s27 run D: local rows (half units). Correctness: test_cuda_prefill in full, then the
# local-rows / random / plan-shape tests with local rows off, with the three-kernel scans,
# and with 8 / 32 sub-counters; memcheck on the local-rows test. Timing: the new build with
# local rows on (new) and off (off, FLASHMSA_PREFILL_LOCAL_ROWS=0), and the HEAD build (base),
# interleaved, 3 passes, random inputs + flush.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
s() { grep -E "PASSED|FAILED" $1 | tr '\n' ' ' | cut -c1-300; }
timeout 200 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(s $L/tp.log)"
F='*LocalRows*:*RandomBatches*:*PlanShapes*:*TailUnits*'
FLASHMSA_PREFILL_LOCAL_ROWS=0 timeout 150 ./test_cuda_prefill --gtest_filter="$F" > $L/tp_off.log 2>&1; t "local rows off rc=$? $(s $L/tp_off.log)"
FLASHMSA_PLAN_FUSED_SCAN=0 timeout 150 ./test_cuda_prefill --gtest_filter="$F" > $L/tp_nofuse.log 2>&1; t "no fused scan rc=$? $(s $L/tp_nofuse.log)"
FLASHMSA_PLAN_SUB_COUNTERS=8 timeout 100 ./test_cuda_prefill --gtest_filter='*LocalRows*:*SingleRequest*' > $L/tp_s8.log 2>&1; t "8 sub-counters rc=$? $(s $L/tp_s8.log)"
FLASHMSA_PLAN_SUB_COUNTERS=32 timeout 100 ./test_cuda_prefill --gtest_filter='*LocalRows*:*SingleRequest*' > $L/tp_s32.log 2>&1; t "32 sub-counters rc=$? $(s $L/tp_s32.log)"
FLASHMSA_PLAN_SUB_COUNTERS=1 timeout 100 ./test_cuda_prefill --gtest_filter='*LocalRows*' > $L/tp_s1.log 2>&1; t "1 sub-counter rc=$? $(s $L/tp_s1.log)"
timeout 240 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*LocalRows*' > $L/san_mem.log 2>&1; t "memcheck local rows rc=$? $(grep 'ERROR SUMMARY' $L/san_mem.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
for pass in 1 2 3; do
  for v in new off base; do
    b=./bench_prefill; [ $v = base ] && b=./bench_prefill_base
    if [ $v = off ]; then export FLASHMSA_PREFILL_LOCAL_ROWS=0; else unset FLASHMSA_PREFILL_LOCAL_ROWS; fi
    timeout 120 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
unset FLASHMSA_PREFILL_LOCAL_ROWS
t "bench"
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in ('new','off','base'):
      x=[]
      for i in (1,2,3):
        for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
          if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
      out.append(f"{v} {' '.join(f'{a[0]:.1f}' for a in x)} med {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.1f})")
    print(case, fmt, ' | '.join(out))
PY
