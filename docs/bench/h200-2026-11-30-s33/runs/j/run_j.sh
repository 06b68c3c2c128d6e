#!/bin/bash
# Session 33 run J: new test CudaDecode.PageCopiesLandingLate (caches in pinned host memory) on the final tree,
# and on a build with the NVFP4 producer's old cp.async group accounting (the bug of run I) to show it can fail.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 90 ./test_cuda_decode --gtest_filter=CudaDecode.PageCopiesLandingLate > $L/late.log 2>&1; t "final rc=$? $(grep 'PASSED\|FAILED  \]' $L/late.log | head -3 | tr '\n' ' ')"
timeout 90 ./test_cuda_decode_bug --gtest_filter=CudaDecode.PageCopiesLandingLate > $L/late_bug.log 2>&1; t "old accounting rc=$? $(grep 'PASSED\|FAILED  \]' $L/late_bug.log | head -3 | tr '\n' ' ')"
timeout 60 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.PageCopiesLandingLate > $L/mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem.log)"
