#!/bin/bash
# Session 14, H200 run C: decode tests with the automatic dims-split choice, prefill tests
# and benchmark after the epilogue address fix, low-latency decode with the automatic
# choice, and the prefill attention kernel's instruction count (ncu).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A6 'Failure' $L/$x.log | head -20
done
timeout 200 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
for q in 1 8; do
  timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q $q --calls 60 --reps 10 --csv $OUT/lowlat_q${q}_auto.csv > $L/bench_q${q}_auto.log 2>&1; t "bench q$q auto rc=$?"
  grep -E 'b1_s4000|b2_s4000|b4_s4000' $OUT/lowlat_q${q}_auto.csv | cut -d, -f2-9,13
done
timeout 200 ncu --kernel-name regex:prefill_attention --launch-skip 1 --launch-count 1 --section SpeedOfLight --section InstructionStats --section WarpStateStats ./bench_prefill --cases 16/1:8192:32768 --reps 3 --selection random --kernels kv_outer > $L/ncu_prefill.log 2>&1; t "ncu rc=$?"
grep -E 'Duration|Executed Instructions  |Issue Slots Busy|Compute \(SM\) Throughput|Warp Cycles Per Issued' $L/ncu_prefill.log | head
