#!/bin/bash
# Session 14, H200 run H: NVFP4 -> E4M3 through one 8-byte magnitude table per block
# scale (gmma::nvfp4_mag_table / nvfp4x4_lookup) in the decode kernels, prefill and the
# indexer. Tests of all three, the Q1 low-latency suite and the NVFP4 decode full suite.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill test_cuda_indexer; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
done
timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats nvfp4,fp8 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1_h.csv > $L/bench_q1.log 2>&1; t "bench q1 rc=$?"
grep -E 'b1_s4000|b4_s4000' $OUT/decode_lowlat_q1_h.csv | cut -d, -f2-9,13
timeout 100 ./bench_decode --suite full --heads 64/4 --formats nvfp4 --cases b32_s10000_q8,b128_s10000_q8 --calls 40 --reps 10 --csv $OUT/decode_nvfp4_h.csv > $L/bench_full.log 2>&1; t "bench full nvfp4 rc=$?"
cut -d, -f2-9,11,12 $OUT/decode_nvfp4_h.csv
