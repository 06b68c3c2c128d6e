#!/bin/bash
# Session 33 run C: racecheck of the NVFP4 consumer-V widening with each raw-full arrival form (a1: cp.async
# noinc arrive, a2: arrive after wait_group, a3: both, the default; -lineinfo builds); bench m1 (default) vs m0.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
CS="compute-sanitizer --print-limit 8"
for a in a3 a1 a2; do
  timeout 100 $CS --tool racecheck ./test_cuda_decode_$a --gtest_filter=CudaDecode.BitwiseDeterministic > $L/race_$a.log 2>&1; t "racecheck $a rc=$? $(grep 'RACECHECK SUMMARY' $L/race_$a.log)"
done
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
for pass in 1 2; do
  for v in m1 m0; do
    bin=./bench_decode; [ $v != m1 ] && bin=./bench_decode_$v
    timeout 40 $bin $B --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
done
