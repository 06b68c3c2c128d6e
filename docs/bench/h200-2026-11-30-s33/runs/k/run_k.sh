#!/bin/bash
# Session 33 run K: PageCopiesLandingLate in the decode, prefill and indexer GPU tests (caches in pinned host memory).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
for b in decode prefill indexer; do
  timeout 120 ./test_cuda_$b --gtest_filter='*PageCopiesLandingLate*' > $L/late_$b.log 2>&1; t "$b rc=$? $(grep 'PASSED\|FAILED  \]' $L/late_$b.log | head -3 | tr '\n' ' ')"
done
timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
