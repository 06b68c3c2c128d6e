#!/bin/bash
# Session 33 run A: BF16 ws under racecheck/memcheck; NVFP4 producer diagnosis (d1: no V widening,
# d2: no K widening, d3: neither; wrong results by design), NVFP4 shared LUT; BF16 signal lag 2 vs 3.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.PaddingRowsAreExactZeros > $L/race_bf16.log 2>&1; t "racecheck bf16 rc=$? $(grep 'RACECHECK SUMMARY' $L/race_bf16.log)"
timeout 90 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.PaddingRowsAreExactZeros:CudaDecode.SingleSplitLargeBatch > $L/mem_bf16.log 2>&1; t "memcheck bf16 rc=$? $(grep 'ERROR SUMMARY' $L/mem_bf16.log)"
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10"
for pass in 1 2; do
  for v in def lut d1 d2 d3; do
    bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
    [ $pass = 2 ] && [ $v = d1 -o $v = d2 -o $v = d3 ] && continue
    timeout 40 $bin $B --formats nvfp4 --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
  for v in def lag2; do
    bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
    timeout 40 $bin $B --formats bf16 --csv $OUT/bf_${v}_$pass.csv > $L/bf_${v}_$pass.log 2>&1; t "bf $v pass $pass rc=$?"
  done
done
timeout 60 ./test_cuda_decode_lut --gtest_filter='CudaDecode.FormatsAndHeadSplits:CudaDecode.*Nvfp4*:CudaDecode.MessyTopk*' > $L/test_lut.log 2>&1; t "test lut rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_lut.log | head -3 | tr '\n' ' ')"
timeout 120 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
