#!/bin/bash
# Session 32 run M: BF16 on the warp-specialised tile kernel (3 K tiles + 2 V tiles, copies in items K(j+2), V(j)):
# guard, bench BF16 default (ws + ping-pong) vs ws without ping-pong vs tile_serial, decode tests, prefill query-outer,
# racecheck/synccheck on the 128-row BF16 path (QueriesPerRequest), CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b128_s100000_q8,b128_s1000_q8,b64_s50000_q8,b32_s1000_q8
timeout 40 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats bf16 --calls 40 --reps 10 --csv $OUT/ws.csv > $L/ws.log 2>&1; t "ws rc=$?"
timeout 40 ./bench_decode_npp --suite full --cases $C --heads 64/4,16/1 --formats bf16 --calls 40 --reps 10 --csv $OUT/npp.csv > $L/npp.log 2>&1; t "npp rc=$?"
FLASHMSA_DECODE_KERNEL=tile_serial timeout 40 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats bf16 --calls 40 --reps 10 --csv $OUT/serial.csv > $L/serial.log 2>&1; t "serial rc=$?"
timeout 40 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats bf16 --calls 40 --reps 10 --csv $OUT/ws2.csv > $L/ws2.log 2>&1; t "ws2 rc=$?"
timeout 120 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 30 ./test_cuda_prefill --gtest_filter='*QueryOuter*' > $L/prefill_qo.log 2>&1; t "prefill qo rc=$? $(grep 'PASSED\|FAILED  \]' $L/prefill_qo.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 70 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.QueriesPerRequest > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 40 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 30 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
