#!/bin/bash
# Session 32 run J (final tree): every GPU test, decode sanitizers, the CLI check, bench_decode full suite
# (3 formats x 64/4,16/1) default (warp-specialised FP8 / NVFP4 tile kernel) and FLASHMSA_DECODE_KERNEL=tile_serial
# interleaved, and the low-latency suite at Q 1.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/full_ws1.csv > $L/full_ws1.log 2>&1; t "full ws 1 rc=$?"
FLASHMSA_DECODE_KERNEL=tile_serial timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/full_serial1.csv > $L/full_serial1.log 2>&1; t "full serial 1 rc=$?"
timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/full_ws2.csv > $L/full_ws2.log 2>&1; t "full ws 2 rc=$?"
timeout 60 ./bench_decode --suite low_latency --q 1 --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/lowlat_q1.csv > $L/lowlat.log 2>&1; t "lowlat rc=$?"
for x in test_cuda_decode test_cuda_prefill test_cuda_indexer test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk:CudaDecode.SwizzledNvfp4VScales' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 100 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch:CudaDecode.SwizzledNvfp4VScales > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 100 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
