#!/bin/bash
# Session 31 run K (final code, after the review fixes: dec_row_words' slot size as a parameter,
# static shared-memory budget, one rule for the warpgroup decode kernel): indexer + gmma tests,
# memcheck/racecheck of the QGMMA paths, the CLI check, bench_indexer decode NVFP4 and prefill (both paths).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_gmma; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "Fp8QkPrecision \]" $L/test_cuda_indexer.log | cut -c1-110
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Qgmma*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 120 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='*DecodeNvfp4Qgmma*' > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 150 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --csv $OUT/dec_exact.csv > $L/dec_exact.log 2>&1; t "dec exact rc=$?"
timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/dec_q8.csv > $L/dec_q8.log 2>&1; t "dec q8 rc=$?"
timeout 100 ./bench_indexer --what prefill --reps 10 --fp8-qk e4m3 --csv $OUT/pf_q8.csv > $L/pf_q8.log 2>&1; t "pf q8 rc=$?"
timeout 100 ./bench_indexer --what prefill --reps 10 --csv $OUT/pf_exact.csv > $L/pf_exact.log 2>&1; t "pf exact rc=$?"
grep "q2048" $L/pf_*.log | cut -c1-150
