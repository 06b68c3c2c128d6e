#!/bin/bash
# Session 34 run F: the new split rule (floor(SMs / CTAs), one wave) and every tile-kernel
# split merge in the combine kernel. Decode and prefill tests, decode sanitizers, the CLI
# check, then bench_decode (all suites, both head splits, all formats) against HEAD's build
# (bench_decode_old), interleaved, two passes.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 60 ./test_cuda_decode --gtest_filter='CudaDecode.SplitRule*:CudaDecode.SixteenSplitsRepeated*' > $L/guard.log 2>&1; t "guard rc=$? $(grep 'PASSED\|FAILED  \]' $L/guard.log | head -3 | tr '\n' ' ')"
for x in test_cuda_decode test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='CudaDecode.SixteenSplitsRepeated*:CudaDecode.PaddingRowsAreExactZeros' > $L/mc_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/mc_decode.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
A="--suite all --heads 64/4,16/1 --calls 40 --reps 10 --formats fp8,bf16,nvfp4"
for rep in 1 2; do
  timeout 100 ./bench_decode_old $A --csv $OUT/old_$rep.csv > $L/old_$rep.log 2>&1; t "old $rep rc=$?"
  timeout 100 ./bench_decode $A --csv $OUT/new_$rep.csv > $L/new_$rep.log 2>&1; t "new $rep rc=$?"
done
