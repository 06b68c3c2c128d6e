#!/bin/bash
# Session 32 run F: warp-specialised tile kernel (FP8 formats only), cheaper page union (both kernels) (decode attention): decode tests (both tile forms),
# query-outer prefill test, sanitizers, bench_decode ws vs serial on 8 cases x 2 head splits x 3 formats.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then
  timeout 90 compute-sanitizer --print-limit 5 ./test_cuda_decode --gtest_filter=CudaDecode.NarrowTopk > $L/guard_mc.log 2>&1; t "guard memcheck rc=$?"; grep -m5 "Invalid\|ERROR SUMMARY\|Failure\|error" $L/guard_mc.log; exit 1
fi
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b128_s100000_q8,b128_s1000_q8,b8_s10000_q8,b32_s1000_q8
timeout 150 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/ws1.csv > $L/ws1.log 2>&1; t "bench ws rc=$?"
FLASHMSA_DECODE_KERNEL=tile_serial timeout 150 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/serial1.csv > $L/serial1.log 2>&1; t "bench serial rc=$?"
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -5 | tr '\n' ' ')"
timeout 60 ./test_cuda_prefill --gtest_filter='*QueryOuter*' > $L/prefill_qo.log 2>&1; t "prefill qo rc=$? $(grep 'PASSED\|FAILED  \]' $L/prefill_qo.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
F='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk'
timeout 100 $CS --tool memcheck ./test_cuda_decode --gtest_filter=$F > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 100 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 100 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
