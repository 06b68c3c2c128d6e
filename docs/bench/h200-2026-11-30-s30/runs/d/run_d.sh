#!/bin/bash
# s30 run D: bucketed lists (plan_count_bucketed + plan_units_bucketed) for small plans, on top of run A's tree.
# Correctness: test_cuda_prefill (new BucketedPlanMatchesCsrPlan), memcheck + racecheck, flashmsa run --check.
# Timeline of the new tree at the floor case. Timing: base (HEAD 559aaae) / new with FLASHMSA_PLAN_BUCKETS=0 / new, 3 passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/tp.log | head -5
timeout 150 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*MissingOwnPage*:*GraphCapture*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool racecheck ./test_cuda_prefill --gtest_filter='*Bucketed*' > $L/racecheck.log 2>&1; t "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tr '\n' ' ')"
timeout 200 ./flashmsa run --device cuda --workload prefill --cases 8 --heads 16/1 --index-dtype fp8 --kv-dtype nvfp4 --check --json $OUT/run_p16.json > $L/run_p16.log 2>&1; t "flashmsa run prefill 16/1 nvfp4 rc=$? $(tail -1 $L/run_p16.log)"
timeout 200 ./flashmsa run --device cuda --workload prefill --cases 8 --kv-dtype fp8 --check --json $OUT/run_p64.json > $L/run_p64.log 2>&1; t "flashmsa run prefill 64/4 fp8 rc=$? $(tail -1 $L/run_p64.log)"
for c in 16/1:8192:32768 64/4:8192:32768; do
  for env in 1 0; do
    n=$(echo $c | tr '/:' '__')_$env
    FLASHMSA_PLAN_BUCKETS=$env timeout 120 ./bench_prefill_tl --cases $c --reps 20 --selection random --kernels kv_outer --csv $OUT/tl_$n.csv > $L/tl_$n.log 2>&1
    t "timeline $c buckets=$env rc=$?"
    grep -E "^timeline (10) " $L/tl_$n.log
  done
done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
V="base off new"
for pass in 1 2 3; do
  for v in $V; do
    b=./bench_prefill_$v; [ $v = off ] && b="env FLASHMSA_PLAN_BUCKETS=0 ./bench_prefill_new"
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
      for i in (1,2,3):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.0f}/{st.median(a[3] for a in x):.0f}) [{' '.join(f'{a[0]:.1f}' for a in x)}]")
    print(case, fmt, ' | '.join(out))
PY
