#!/bin/bash
# Session 15, H200 run A: prefill epilogue without normalisation (unnormalised BF16 O and
# (m c, l) per row; the combine divides), stmatrix staging, row offsets precomputed at
# the gather, tree max/sum in the softmax, cheaper Q gather. Prefill tests, memcheck,
# the prefill benchmark with the SDPA peer; then decode A/B for the warp-MMA min-splits
# rule (default plan vs FLASHMSA_DECODE_KERNEL=warp_mma at row CTAs 64).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
grep -B2 -A8 'Failure' $L/test_cuda_prefill.log | head -30
timeout 200 ./bench_prefill --reps 4 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
for K in default warp_mma; do
  if [ $K = default ]; then unset FLASHMSA_DECODE_KERNEL; else export FLASHMSA_DECODE_KERNEL=$K; fi
  timeout 60 ./bench_decode --suite low_latency --heads 64/4 --formats bf16,fp8,nvfp4 --cases b2_s1000_q8,b2_s4000_q8,b2_s10000_q8 --calls 60 --reps 10 --csv $OUT/dec_b2q8_$K.csv > $L/dec_b2q8_$K.log 2>&1; t "b2 Q8 64/4 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b2q8_$K.csv
  timeout 60 ./bench_decode --suite full --heads 16/1 --formats bf16,fp8,nvfp4 --cases b8_s1000_q8,b8_s10000_q8,b8_s50000_q8 --calls 60 --reps 10 --csv $OUT/dec_b8q8_$K.csv > $L/dec_b8q8_$K.log 2>&1; t "b8 Q8 16/1 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b8q8_$K.csv
  timeout 60 ./bench_decode --suite full --q 1 --heads 16/1 --formats bf16,fp8 --cases b64_s1000_q8,b64_s10000_q8 --calls 60 --reps 10 --csv $OUT/dec_b64q1_$K.csv > $L/dec_b64q1_$K.log 2>&1; t "b64 Q1 16/1 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_b64q1_$K.csv
done
