#!/bin/bash
# s30 run F (closing): the final tree (HEAD 559aaae + bucketed plan lists, the attention kernel's start loads,
# the combine's v4 store). Correctness: test_cuda_prefill, memcheck, racecheck, flashmsa run --check (default
# cases; 32 prefill workload cases at 16/1 FP8). Timing: final vs base (559aaae), 3 interleaved passes; SDPA peer.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp.log | tr '\n' ' ')"
timeout 150 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*MissingOwnPage*:*GraphCapture*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool racecheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*MissingOwnPage*' > $L/racecheck.log 2>&1; t "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tr '\n' ' ')"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/default.json > $L/default.log 2>&1; t "flashmsa run default rc=$? $(tail -1 $L/default.log)"
timeout 200 ./flashmsa run --device cuda --workload prefill --cases 32 --heads 16/1 --index-dtype fp8 --kv-dtype fp8 --check --json $OUT/p32.json > $L/p32.log 2>&1; t "flashmsa run prefill 32 rc=$? $(tail -1 $L/p32.log)"
grep -i -E "weighted|mean" $L/p32.log | head -6
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
V="base final"
for pass in 1 2 3; do
  for v in $V; do
    timeout 120 ./bench_prefill_$v --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench"
(cd ../bench && timeout 120 python3 sdpa_peer.py > $L/sdpa.log 2>&1); t "sdpa rc=$? $(head -3 $L/sdpa.log | tr '\n' ' ')"
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
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us','tflops')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.0f}/{st.median(a[3] for a in x):.0f}; {st.median(a[4] for a in x):.1f} TF/s) [{' '.join(f'{a[0]:.1f}' for a in x)}]")
    print(case, fmt, ' | '.join(out))
PY
