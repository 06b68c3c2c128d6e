#!/bin/bash
# Session 14, H200 run I: the last commit's binaries under memcheck (decode, prefill) and
# the CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*:*Padding*:*OddTokenStride*:*Swizzled*' > $L/san_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_decode.log)"
timeout 60 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 60 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
