#!/bin/bash
# Session 31 run E (final tree): every GPU test, memcheck/racecheck of the indexer decode paths,
# the CLI check, bench_indexer decode (all suites) + top-k, exact and --fp8-qk e4m3, two passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_gmma test_cuda_prefill test_cuda_decode test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "Fp8QkPrecision \]" $L/test_cuda_indexer.log | cut -c1-110
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*' > $L/memcheck.log 2>&1; t "memcheck indexer decode rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeNvfp4Qgmma:CudaIndexer.DecodeE4m3Shapes' > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do
  timeout 120 ./bench_indexer --what decode,topk --suite all --formats fp8,nvfp4 --reps 10 --csv $OUT/exact_$rep.csv > $L/exact_$rep.log 2>&1; t "bench exact $rep rc=$?"
  timeout 120 ./bench_indexer --what decode --suite all --formats nvfp4 --reps 10 --fp8-qk e4m3 --csv $OUT/q8_$rep.csv > $L/q8_$rep.log 2>&1; t "bench q8 $rep rc=$?"
done
