#!/bin/bash
# Session 16, H200 run G: back to the run-D loop; wgmma descriptors built once per
# product and advanced by a uniform add (desc_add), the warpgroup index made
# warp-uniform, epilogue staging reads at fixed 1 KB strides; prefill and decode tests
# (attn_tile.cuh is shared), the floor shape twice, decode spot checks, ncu hot spots.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'FAILED  \]' $L/test_cuda_decode.log | head -4 | tr '\n' ' ')"
for i in 1 2; do
timeout 100 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/g.csv > /dev/null 2>&1
cut -d, -f1-4,6,8,9,11-13 $OUT/g.csv
done
timeout 100 ./bench_decode --suite full --heads 64/4 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/g_decode.csv > $L/bench_decode.log 2>&1; t "bench_decode rc=$?"
grep -E 'full,(b32_s10000|b128_s10000)' $OUT/g_decode.csv | cut -d, -f1-9,11,12,13
./run_c.sh
