#!/bin/bash
# Session 33 run E: NVFP4 consumer-V widening: computed tables (def) vs shared tables for the consumers (lutc) or both
# roles (lutb) vs producer widening (m0); FP8 / BF16 with the union candidates in the page buffers (def) vs HEAD.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
NVT='CudaDecode.BitwiseDeterministic:CudaDecode.SwizzledNvfp4VScales:CudaDecode.Nvfp4ScalesWithOddTokenStride:CudaDecode.MessyTopk*'
timeout 40 ./test_cuda_decode --gtest_filter="$NVT" > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
C=b8_s1000_q8,b32_s1000_q8,b128_s1000_q8,b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10"
for pass in 1 2; do
  for v in def lutc lutb m0; do
    bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
    timeout 40 $bin $B --formats nvfp4 --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
  for v in def head; do
    bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
    timeout 40 $bin $B --formats fp8,bf16 --csv $OUT/fb_${v}_$pass.csv > $L/fb_${v}_$pass.log 2>&1; t "fp8/bf16 $v pass $pass rc=$?"
  done
done
