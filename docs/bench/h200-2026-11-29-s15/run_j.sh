#!/bin/bash
# Session 15, H200 run J (after review): decode rule narrowed to "one wave or Q 1",
# prefill guard T < 2^27. Decode and prefill tests, memcheck prefill, the CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A8 'Failure' $L/$x.log | head -20
done
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 150 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
