#!/bin/bash
# Session 33 run I: the final tree (review fix: the NVFP4 producer's cp.async group accounting; ping-pong for
# NVFP4): decode tests, sanitizers, full suite NVFP4 + FP8, CLI checks.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4,fp8 --csv $OUT/full.csv > $L/full.log 2>&1; t "full rc=$?"
timeout 150 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 80 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 60 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.SwizzledNvfp4VScales > $L/race2.log 2>&1; t "racecheck nvfp4 scales rc=$? $(grep 'RACECHECK SUMMARY' $L/race2.log)"
timeout 60 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 60 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic:CudaDecode.*Nvfp4*:CudaDecode.PaddingRowsAreExactZeros > $L/mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem.log)"
timeout 40 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 60 ./flashmsa run --device cuda --check --workload decode --cases 6 --kv-dtype nvfp4 --index-dtype fp8 --json $OUT/run_cuda_nvfp4.json > $L/run_cuda_nvfp4.log 2>&1; t "flashmsa run nvfp4 --check rc=$? $(tail -1 $L/run_cuda_nvfp4.log)"
