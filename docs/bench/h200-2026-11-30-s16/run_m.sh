#!/bin/bash
# Session 16, H200 run M (NOT run: device time ran out; for branch indexer-e4m3-preconvert):
# prefill E4M3 index-K pages converted once to BF16 (preconvert_kernel) and scored by the
# BF16 copy kernel; indexer tests with and without it, memcheck, the prefill indexer
# benchmark with and without it, the CLI check. Copy test_cuda_indexer, bench_indexer and
# flashmsa of the branch build into .devbin/ with this script.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log) $(grep 'FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
FLASHMSA_INDEXER_PRECONVERT=0 timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer_nopre.log 2>&1; t "test_cuda_indexer (PRECONVERT=0) rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer_nopre.log)"
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*PrefillVarlen*:*ExactTies*' > $L/san_indexer.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_indexer.log)"
for pre in 1 0; do
  FLASHMSA_INDEXER_PRECONVERT=$pre timeout 120 ./bench_indexer --what prefill --reps 10 --csv $OUT/m_pre$pre.csv > $L/bench_pre$pre.log 2>&1; t "bench_indexer PRECONVERT=$pre rc=$?"
  cut -d, -f2-10 $OUT/m_pre$pre.csv
done
timeout 150 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
