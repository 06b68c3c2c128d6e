#!/bin/bash
# Session 25 run H (closing build with the fallback of 28 tiles per unit): the prefill tests, memcheck, the CLI
# check, the five bench cases (three passes), and the 128 prefill cases through the CLI.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
timeout 60 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*TailUnits*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do
  timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/bench_prefill_$pass.csv > $L/bench_prefill_$pass.log 2>&1
  echo "pass $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/bench_prefill_$pass.csv | tail -n +2 | paste -sd' ')"
done
timeout 200 ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "flashmsa run --workload prefill rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed"
tail -1 $L/prefill128.log
