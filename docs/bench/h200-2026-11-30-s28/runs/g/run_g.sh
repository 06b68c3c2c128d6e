#!/bin/bash
# s28 run G: the final tree (library = session 27's, plus the MissingOwnPage test): test_cuda_prefill in
# full, memcheck on MissingOwnPage, and the floor case's bench (random inputs + flush, 2 passes).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E 'PASSED|FAILED' $L/tp.log | tr '\n' ' ')"
grep -E "^\[ +(OK|FAILED) +\]" $L/tp.log
timeout 150 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*MissingOwnPage*' > $L/san_mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_mem.log)"
for pass in 1 2; do
  timeout 120 ./bench_prefill --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_$pass.csv > $L/pf_$pass.log 2>&1
  grep -E "bf16|fp8|nvfp4" $L/pf_$pass.log | head -6
done
t "bench"
