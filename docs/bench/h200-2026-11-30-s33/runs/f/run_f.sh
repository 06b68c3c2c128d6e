#!/bin/bash
# Session 33 run F: the final tree (NVFP4 V widened by the consumers, consumers' shared block-scale tables):
# GPU tests touched by attn_tile.cuh, sanitizers, CLI check, full NVFP4 suite against the producer widening (m0).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
B="--suite full --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
timeout 40 ./bench_decode $B --csv $OUT/nv_new_1.csv > $L/nv_new_1.log 2>&1; t "nv new 1 rc=$?"
timeout 40 ./bench_decode_m0 $B --csv $OUT/nv_m0_1.csv > $L/nv_m0_1.log 2>&1; t "nv m0 1 rc=$?"
timeout 40 ./bench_decode $B --csv $OUT/nv_new_2.csv > $L/nv_new_2.log 2>&1; t "nv new 2 rc=$?"
timeout 40 ./bench_decode_m0 $B --csv $OUT/nv_m0_2.csv > $L/nv_m0_2.log 2>&1; t "nv m0 2 rc=$?"
timeout 150 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
timeout 100 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 80 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 60 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.SwizzledNvfp4VScales > $L/race2.log 2>&1; t "racecheck nvfp4 scales rc=$? $(grep 'RACECHECK SUMMARY' $L/race2.log)"
timeout 60 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 60 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic:CudaDecode.*Nvfp4*:CudaDecode.PaddingRowsAreExactZeros > $L/mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem.log)"
timeout 40 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 60 ./flashmsa run --device cuda --check --workload decode --cases 6 --kv-dtype nvfp4 --index-dtype fp8 --json $OUT/run_cuda_nvfp4.json > $L/run_cuda_nvfp4.log 2>&1; t "flashmsa run nvfp4 --check rc=$? $(tail -1 $L/run_cuda_nvfp4.log)"
