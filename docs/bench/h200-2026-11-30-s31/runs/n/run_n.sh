#!/bin/bash
# Session 31 run N: NVFP4 decode cases over padded code / scale rows (token strides 80 and 16 bytes)
# for the exact per-warp kernel and the QGMMA warpgroup kernel; the whole indexer test binary;
# memcheck of the two tests.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer > $L/test.log 2>&1; t "test_cuda_indexer rc=$? $(grep 'PASSED\|FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
grep -m5 "Failure\|padded" $L/test.log | cut -c1-200
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*DecodeNvfp4Qgmma*:*DecodeE4m3Shapes*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
