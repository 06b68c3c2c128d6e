#!/bin/bash
# Session 13 final H200 run, part A: every GPU test (decode twice: cluster merge and the
# combine-kernel fallback), compute-sanitizer on decode, the CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for x in test_cuda_decode test_cuda_prefill test_cuda_gmma test_cuda_indexer test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "cluster capacity" $L/test_cuda_decode.log | tr '\n' ';'; echo
FLASHMSA_DECODE_MERGE=combine timeout 150 ./test_cuda_decode > $L/test_cuda_decode_combine.log 2>&1; t "test_cuda_decode (FLASHMSA_DECODE_MERGE=combine) rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode_combine.log) $(grep 'FAILED  \]' $L/test_cuda_decode_combine.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*:*Padding*:*Messy*' > $L/san_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_decode.log)"
timeout 90 $CS --tool racecheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*' > $L/race_decode.log 2>&1; t "racecheck decode rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_decode.log)"
timeout 90 $CS --tool synccheck ./test_cuda_decode --gtest_filter='*Padding*' > $L/sync_decode.log 2>&1; t "synccheck decode rc=$? $(grep -E 'ERROR SUMMARY' $L/sync_decode.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
