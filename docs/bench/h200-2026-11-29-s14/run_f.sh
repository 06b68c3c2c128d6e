#!/bin/bash
# Session 14, H200 run F: NVFP4 block scales copied with the page (cp.async into the
# stage region; plain loads for unaligned planes) in the decode tile kernel and prefill.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A6 'Failure' $L/$x.log | head -20
done
grep -E 'OddTokenStride|SwizzledNvfp4' $L/test_cuda_decode.log
timeout 200 ./bench_decode --suite full --heads 64/4,16/1 --formats nvfp4 --calls 40 --reps 10 --csv $OUT/decode_nvfp4.csv > $L/bench_decode.log 2>&1; t "bench_decode nvfp4 rc=$?"
grep -E 'b32_s10000|b128_s10000|b64_s50000' $OUT/decode_nvfp4.csv | cut -d, -f2-9,11,12
timeout 200 ./bench_prefill --cases 16/1:8192:32768 --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
