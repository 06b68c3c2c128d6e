#!/bin/bash
# Session 33 run B: NVFP4 ws with the V widening on the consumers (m1: after P, the default build; m2: under
# the wgmmas) against the producer widening (m0). Tests first (a deadlock would time out), then bench, sanitizers.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard m1 rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
timeout 40 ./test_cuda_decode_m2 --gtest_filter="$NVT" > $L/guard_m2.log 2>&1; rc2=$?; t "guard m2 rc=$rc2 $(grep 'PASSED\|FAILED' $L/guard_m2.log | head -5 | tr '\n' ' ')"
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
for pass in 1 2; do
  for v in m1 m0 m2; do
    bin=./bench_decode; [ $v != m1 ] && bin=./bench_decode_$v
    [ $v = m2 ] && [ $rc2 -ne 0 ] && continue
    timeout 40 $bin $B --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
done
timeout 40 ./bench_decode --suite full --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4 --csv $OUT/nv_full_m1.csv > $L/nv_full_m1.log 2>&1; t "nv full m1 rc=$?"
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 90 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 90 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales > $L/mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem.log)"
timeout 150 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
