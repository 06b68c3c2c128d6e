#!/bin/bash
# Session 33 run H: NVFP4 with the FP8 ping-pong between the consumer warpgroups (ppnv), and with the
# producer's K widening also reading the shared tables (lutb, a 4-byte spill), against the default.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 60 ./test_cuda_decode_ppnv --gtest_filter='CudaDecode.BitwiseDeterministic:CudaDecode.*Nvfp4*:CudaDecode.FormatsAndHeadSplits' > $L/test_ppnv.log 2>&1; t "test ppnv rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_ppnv.log | head -3 | tr '\n' ' ')"
C=b32_s1000_q8,b128_s1000_q8,b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
for pass in 1 2; do
  for v in def ppnv lutb; do
    bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
    timeout 40 $bin $B --csv $OUT/nv_${v}_$pass.csv > $L/nv_${v}_$pass.log 2>&1; t "nv $v pass $pass rc=$?"
  done
done
