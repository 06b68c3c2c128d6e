#!/bin/bash
# Session 32 run K (final tree: NVFP4 widening back to per-group tables, 88 / 208 registers): decode and query-outer
# prefill tests, NVFP4 memcheck/racecheck, bench_decode NVFP4 + FP8 full suite, default against tile_serial, CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/full_ws.csv > $L/full_ws.log 2>&1; t "full ws rc=$?"
FLASHMSA_DECODE_KERNEL=tile_serial timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --formats nvfp4 --calls 40 --reps 10 --csv $OUT/full_serial.csv > $L/full_serial.log 2>&1; t "full serial rc=$?"
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.SwizzledNvfp4VScales' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 100 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.SwizzledNvfp4VScales > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
