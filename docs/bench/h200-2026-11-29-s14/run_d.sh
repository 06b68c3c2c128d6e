#!/bin/bash
# Session 14, H200 run D: decode tests (automatic dims-split expectations), then SASS hot
# spots (ncu source page) of the decode tile kernel at b128 Q8 10K 64/4 FP8 and BF16 and
# of the prefill attention kernel after the epilogue fix.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'FAILED  \]' $L/test_cuda_decode.log | head -4 | tr '\n' ' ')"
grep -B2 -A6 'Failure' $L/test_cuda_decode.log | head -20
prof() {  # name, kernel regex, command...
  local n=$1 k=$2; shift 2
  timeout 200 ncu --kernel-name regex:$k --launch-skip 3 --launch-count 1 --set full --import-source no -o $OUT/$n "$@" > $L/ncu_$n.log 2>&1; t "ncu $n rc=$?"
  ncu -i $OUT/$n.ncu-rep --page details > $L/$n.details.txt 2>&1
  grep -E '^ +(Duration|Executed Instructions  |Issue Slots Busy|Registers Per Thread|Grid Size|Block Size|Dynamic Shared|Achieved Occupancy|Warp Cycles Per Issued|Memory Throughput|DRAM Throughput|L2 Hit Rate) ' $L/$n.details.txt | head -14
  grep -A1 'highest-utilized' $L/$n.details.txt | head -2
  ncu -i $OUT/$n.ncu-rep --page source --csv --print-source sass > $L/$n.sass.csv 2>/dev/null
  python3 sass_summary.py $L/$n.sass.csv
  rm -f $OUT/$n.ncu-rep
}
prof dec_fp8 sparse_attention_kernel ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats fp8 --calls 4 --reps 2
prof dec_bf16 sparse_attention_kernel ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats bf16 --calls 4 --reps 2
prof prefill prefill_attention ./bench_prefill --cases 16/1:8192:32768 --reps 3 --selection random --kernels kv_outer
