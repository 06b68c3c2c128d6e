#!/bin/bash
# Session 16, H200 run J: epilogue addresses by XOR (staging) and one wide multiply-add (global,
# in the store asm), one L2 policy per epilogue, 32-bit query position in the gather;
# tests, memcheck, the floor shape twice.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
timeout 60 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter="*LseOff*:*HeadMajorQuery*" > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep "ERROR SUMMARY" $L/san_prefill.log)"
for i in 1 2; do
timeout 100 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/h.csv > /dev/null 2>&1
cut -d, -f1-4,6,8,9,11-13 $OUT/h.csv
done
