#!/bin/bash
# Session 33 run D: union candidates in the page buffers (12 KB less static smem); NVFP4 consumer-V widening
# with 2 K tiles (default) vs 1 (kt1) vs producer widening (m0); tests, sanitizers, FP8/BF16 regression check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
for pass in 1 2; do
  for v in kt2 kt1 m0; do
    bin=./bench_decode; [ $v != kt2 ] && bin=./bench_decode_$v
    timeout 40 $bin $B --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
done
timeout 60 ./bench_decode --suite full --heads 64/4,16/1 --calls 40 --reps 10 --formats fp8,nvfp4,bf16 --csv $OUT/full.csv > $L/full.log 2>&1; t "full rc=$?"
timeout 150 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 60 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 60 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.PaddingRowsAreExactZeros > $L/mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem.log)"
timeout 40 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
