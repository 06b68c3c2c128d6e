#!/bin/bash
# Session 15, H200 run K: prefill GPU tests with the review's gaps filled (head splits
# 16/4 and 16/8, i.e. G = 4 and 2; q as a head-major strided view), memcheck on the new test.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
grep -B2 -A8 'Failure' $L/test_cuda_prefill.log | head -30
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*HeadMajorQuery*' > $L/san_prefill.log 2>&1; t "memcheck HeadMajorQuery rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
