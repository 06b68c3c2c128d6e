#!/bin/bash
# s20 run L: review follow-ups. The wg kernel E4M3-only (SASS identical), the 32-bit stride rule for
# E4M3 only, new test DecodeManyPagesPerWarp (several pages per warp/group, NT 2/4/8) and 1100 requests.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log) $(grep 'FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
grep -E "OK \] CudaIndexer.Decode(ManyPages|E4m3Shapes)" $L/test_cuda_indexer.log
CS="compute-sanitizer --print-limit 5"
timeout 70 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeManyPagesPerWarp' > $L/san_many.log 2>&1; t "memcheck many-pages rc=$? $(grep 'ERROR SUMMARY' $L/san_many.log)"
timeout 120 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeManyPagesPerWarp' > $L/race_many.log 2>&1; t "racecheck many-pages rc=$? $(grep 'RACECHECK SUMMARY' $L/race_many.log)"
