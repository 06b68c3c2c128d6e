#!/bin/bash
# Session 15, H200 run L: QK16 gathers an F16 copy of the E4M3 query (widen_query, once
# per call) by TMA like BF16, instead of widening every tile in shared memory.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
grep -B2 -A8 'Failure' $L/test_cuda_prefill.log | head -20
timeout 200 ./bench_prefill --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 60 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 60 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
