#!/bin/bash
# Session 15, H200 run B: L2 policies in the prefill attention kernel (Q gathers
# evict_last, partial stores evict_first); decode with warp-MMA min splits 2 (tests), and
# the A/B for min splits 1 (row CTAs 128: b4 Q8 64/4, b16 Q8 16/1, b32 Q1 64/4, b128 Q1 16/1).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_prefill test_cuda_decode; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A8 'Failure' $L/$x.log | head -20
done
timeout 200 ./bench_prefill --reps 4 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
for K in default warp_mma; do
  if [ $K = default ]; then unset FLASHMSA_DECODE_KERNEL; else export FLASHMSA_DECODE_KERNEL=$K; fi
  timeout 60 ./bench_decode --suite low_latency --heads 64/4 --formats bf16,fp8,nvfp4 --cases b4_s1000_q8,b4_s4000_q8 --calls 60 --reps 10 --csv $OUT/dec_b4q8_$K.csv > $L/dec_b4q8_$K.log 2>&1; t "b4 Q8 64/4 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b4q8_$K.csv | tail -n +2
  timeout 60 ./bench_decode --suite full --heads 16/1 --formats bf16,fp8,nvfp4 --q 2 --cases b8_s10000_q8 --calls 60 --reps 10 --csv $OUT/dec_b8q2_$K.csv > $L/dec_b8q2_$K.log 2>&1; t "b8 Q2 16/1 (64 rows) $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b8q2_$K.csv | tail -n +2
  timeout 60 ./bench_decode --suite full --q 1 --heads 64/4 --formats bf16,fp8,nvfp4 --cases b32_s1000_q8,b32_s10000_q8 --calls 60 --reps 10 --csv $OUT/dec_b32q1_$K.csv > $L/dec_b32q1_$K.log 2>&1; t "b32 Q1 64/4 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b32q1_$K.csv | tail -n +2
  timeout 60 ./bench_decode --suite full --q 1 --heads 16/1 --formats bf16,fp8,nvfp4 --cases b128_s1000_q8,b128_s10000_q8 --calls 60 --reps 10 --csv $OUT/dec_b128q1_$K.csv > $L/dec_b128q1_$K.log 2>&1; t "b128 Q1 16/1 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b128q1_$K.csv | tail -n +2
done
