#!/bin/bash
# Session 14, H200 run E: page copy / conversion with constant-stride addressing and
# shared-space loads (decode tile kernel and prefill), decode mask skipped on full pages.
# Tests, then the decode full suite (64/4 and 16/1, BF16/FP8/NVFP4) and prefill cases.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A6 'Failure' $L/$x.log | head -20
done
timeout 200 ./bench_decode --suite full --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode_full.csv > $L/bench_decode.log 2>&1; t "bench_decode full rc=$?"
grep -E 'b32_s10000|b128_s10000|b64_s50000' $OUT/decode_full.csv | cut -d, -f2-9,11,12
timeout 200 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
