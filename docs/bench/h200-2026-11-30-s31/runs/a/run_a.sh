#!/bin/bash
# Session 31 run A: the opt-in QGMMA NVFP4 decode scorer (decode_score_wg_kernel<NT, true>):
# tests, memcheck/racecheck, then bench_indexer decode NVFP4 exact vs --fp8-qk e4m3 (3 and 4 stages).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_indexer --gtest_filter='*DecodeNvfp4Qgmma*:*Fp8QkPrecision*:*DecodeE4m3Shapes*:*DecodeManyPagesPerWarp*:*DecodeFormats*' > $L/test.log 2>&1; t "test rc=$? ok=$(grep -c 'OK \]' $L/test.log) $(grep 'FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
grep "Fp8QkPrecision \]" $L/test.log | cut -c1-110
grep -m5 "Failure\|page_scores\[" $L/test.log | cut -c1-200
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*DecodeNvfp4Qgmma*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='*DecodeNvfp4Qgmma*' > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
for rep in 1 2; do
  timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --csv $OUT/exact_$rep.csv > $L/exact_$rep.log 2>&1; t "exact $rep rc=$?"
  timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8_$rep.csv > $L/q8_$rep.log 2>&1; t "q8 $rep rc=$?"
  timeout 100 ./bench_indexer_s4 --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8s4_$rep.csv > $L/q8s4_$rep.log 2>&1; t "q8s4 $rep rc=$?"
done
head -3 $L/q8_1.log
