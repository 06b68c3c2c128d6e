#!/bin/bash
# Session 16, H200 run K: indexer score kernels with wgmma descriptors advanced by
# uniform adds (as the attention kernels); indexer tests, memcheck, and the prefill
# indexer benchmark, the previous build (bench_indexer_old) beside the new one.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log) $(grep 'FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*PrefillVarlen*:*ExactTies*' > $L/san_indexer.log 2>&1; t "memcheck indexer (PrefillVarlen, ExactTies) rc=$? $(grep 'ERROR SUMMARY' $L/san_indexer.log)"
for b in bench_indexer_old bench_indexer; do
  timeout 120 ./$b --what prefill --reps 10 --csv $OUT/k_$b.csv > $L/$b.log 2>&1; t "$b rc=$?"
  cut -d, -f2-10 $OUT/k_$b.csv
done
