#!/bin/bash
# Session 14, H200 run G: after factoring the warp-MMA kernels' Q K^T fragment code into
# qk_fragments (same instructions expected): decode tests and the Q1 low-latency suite.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'FAILED  \]' $L/test_cuda_decode.log | head -4 | tr '\n' ' ')"
timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1_g.csv > $L/bench_q1.log 2>&1; t "bench q1 rc=$?"
grep -E 'b1_s4000|b4_s4000' $OUT/decode_lowlat_q1_g.csv | cut -d, -f2-9,13
