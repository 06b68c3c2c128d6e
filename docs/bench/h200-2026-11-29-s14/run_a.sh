#!/bin/bash
# Session 14, H200 run A: decode tests on all three decode kernels (warp_mma, tile,
# warp_mma_dsplit), prefill/indexer tests after the attn_tile helper refactor, the
# low-latency Q1 decode bench with and without the dims-split kernel, and an ncu profile
# of the prefill KV-outer attention kernel (BF16, 16/1, 8192, 32768).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_decode test_cuda_prefill test_cuda_indexer; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
done
grep -B3 -A3 'Failure' $L/test_cuda_decode.log | head -30
for k in default warp_mma_dsplit; do
  if [ $k = default ]; then unset FLASHMSA_DECODE_KERNEL; else export FLASHMSA_DECODE_KERNEL=$k; fi
  timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8 --q 1 --calls 60 --reps 10 --csv $OUT/lowlat_q1_$k.csv > $L/bench_q1_$k.log 2>&1; t "bench q1 $k rc=$?"
  grep -E 'b1_s4000|b2_s' $OUT/lowlat_q1_$k.csv | cut -d, -f2-9,13
done
unset FLASHMSA_DECODE_KERNEL
timeout 240 ncu --kernel-name regex:prefill_attention --launch-skip 1 --launch-count 1 --set full -o $OUT/prefill_attn ./bench_prefill --cases 16/1:8192:32768 --reps 3 --selection random --kernels kv_outer > $L/ncu_prefill.log 2>&1; t "ncu prefill rc=$?"
ncu -i $OUT/prefill_attn.ncu-rep --page details > $OUT/prefill_attn_details.txt 2>&1
grep -E 'Duration|Registers|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Stall|Warp Cycles Per Issued|One or More|No Eligible|Theoretical Occ' $OUT/prefill_attn_details.txt | head -40
ncu -i $OUT/prefill_attn.ncu-rep --page raw --csv 2>/dev/null | python3 -c "
import csv,sys
r=list(csv.reader(sys.stdin)); h,v=r[0],r[2] if len(r)>2 else r[1]
for a,b in zip(h,v):
  if 'smsp__average_warp' in a and 'issue_stalled' in a and 'ratio' in a:
    try:
      if float(b.replace(',',''))>0.05: print(a,b)
    except: pass
" | sort -k2 -n -r | head -20
