#!/bin/bash
# s21 run J: the combine at 2 rows per CTA by default (after runs H, I): test_cuda_prefill, memcheck and
# racecheck of the prefill tests that exercise the combine, bench_prefill (both selections).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill > $L/test_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_prefill.log) $(grep 'FAILED  \]' $L/test_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*GraphCapture*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_pf.log 2>&1; t "racecheck prefill rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 200 ./bench_prefill --reps 10 --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-8,10-13 $OUT/prefill.csv | grep -E "random|hq"
