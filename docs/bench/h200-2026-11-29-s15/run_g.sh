#!/bin/bash
# Session 15, H200 run G: plan kernels one thread per (query, KV head, slot), chained with
# PDL (plan_zero replaces the memset). Prefill tests, sanitizers, benchmark, SDPA peer.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
grep -B2 -A10 'Failure' $L/test_cuda_prefill.log | head -30
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*RandomBatches*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 150 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 200 ./bench_prefill --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log
