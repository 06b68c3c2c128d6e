#!/bin/bash
# Session 16, H200 run I: the epilogue loads its row indices before the stmatrix (their
# shared loads were exposed after it); tests, the floor shape twice.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
for i in 1 2; do
timeout 100 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/h.csv > /dev/null 2>&1
cut -d, -f1-4,6,8,9,11-13 $OUT/h.csv
done
