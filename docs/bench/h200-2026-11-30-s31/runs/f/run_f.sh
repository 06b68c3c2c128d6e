#!/bin/bash
# Session 31 run F: after the usability fixes (gmma self-test kernel templated per variant, benchmarks'
# device check, CLI input checks): test_cuda_gmma, test_cuda_indexer, the CLI check, a bench smoke run.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_gmma test_cuda_indexer; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
timeout 150 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 60 ./bench_indexer --what decode --suite full --formats nvfp4 --case b32_s50000 --reps 10 --csv $OUT/smoke.csv > $L/bench.log 2>&1; t "bench_indexer rc=$? $(grep -c dscore $L/bench.log) dscore lines"
timeout 60 ./bench_combine_sm > $L/combine.log 2>&1; t "bench_combine_sm rc=$? $(tail -1 $L/combine.log | cut -c1-100)"
