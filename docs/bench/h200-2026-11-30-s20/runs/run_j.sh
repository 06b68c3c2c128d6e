#!/bin/bash
# s20 run J: the decode scoring kernels' shared prologue pieces (dec_page_prefix, dec_first_request,
# DecBtWindow; SASS equal but for register names and two compares): indexer and fused tests, memcheck,
# racecheck, CLI check, bench_indexer decode against the closing run.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_fused; do
timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*:*ExactTies*:*NaN*' > $L/san_ix.log 2>&1; t "memcheck indexer decode rc=$? $(grep 'ERROR SUMMARY' $L/san_ix.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeE4m3Shapes' > $L/race_ix.log 2>&1; t "racecheck indexer decode rc=$? $(grep 'RACECHECK SUMMARY' $L/race_ix.log)"
timeout 150 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 100 ./bench_indexer --what decode,topk --suite all --reps 10 --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer rc=$?"
grep -E "^decode" $OUT/indexer.csv | grep -E "b(32|64|128)_s(50000|100000|200000)_" | cut -d, -f2,3,8,11 | sed 's/_q8//;s/\/exact//' | paste -sd' '
