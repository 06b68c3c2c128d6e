#!/bin/bash
# sass_summary.py: docs/bench/h200-2026-11-29-s14/sass_summary.py (copied beside the binaries).
# Session 15, H200 run C: ncu of the prefill attention kernel (BF16, 16/1, 8192, 32768)
# after the epilogue/gather changes and L2 policies: stalls, memory, SASS hot spots.
# Then the decode kernel A/B beyond one wave of row CTAs (default plan vs warp_mma).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 240 ncu --kernel-name regex:prefill_attention --launch-skip 1 --launch-count 1 --set full --import-source no -o $OUT/pa ./bench_prefill --cases 16/1:8192:32768 --reps 3 --selection random --kernels kv_outer > $L/ncu_prefill.log 2>&1; t "ncu prefill rc=$?"
tail -3 $L/ncu_prefill.log
ncu -i $OUT/pa.ncu-rep --page details > $L/pa_details.txt 2>&1
grep -E '^ +(Duration|Executed Instructions  |Issue Slots Busy|Registers Per Thread|Achieved Occupancy|Warp Cycles Per Issued|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit Rate|Compute \(SM\) Throughput|Executed Ipc Active|No Eligible|SM Frequency|DRAM Frequency|Max Bandwidth|L2 Compression) ' $L/pa_details.txt | head -24
grep -A1 'highest-utilized' $L/pa_details.txt | head -4
ncu -i $OUT/pa.ncu-rep --page raw --csv 2>/dev/null > $L/pa_raw.csv
python3 - $L/pa_raw.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1]))); h=r[0]; v=r[2] if len(r)>2 else r[1]
out=[]
for a,b in zip(h,v):
  if a.startswith('smsp__average_warps_issue_stalled') and a.endswith('per_issue_active.ratio'):
    try: out.append((float(b.replace(',','')),a))
    except: pass
for x,a in sorted(out,reverse=True)[:14]: print(f'{x:6.2f} {a}')
for key in ['dram__bytes_read.sum','dram__bytes_write.sum','lts__t_sectors_srcunit_tex_op_read.sum','lts__t_sectors_srcunit_tex_op_write.sum','sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active','sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active','sm__cycles_elapsed.avg.per_second']:
  for a,b in zip(h,v):
    if a==key: print(a,b)
PY
ncu -i $OUT/pa.ncu-rep --page source --csv --print-source sass > $L/pa.sass.csv 2>/dev/null
python3 sass_summary.py $L/pa.sass.csv
rm -f $OUT/pa.ncu-rep
for K in default warp_mma; do
  if [ $K = default ]; then unset FLASHMSA_DECODE_KERNEL; else export FLASHMSA_DECODE_KERNEL=$K; fi
  timeout 60 ./bench_decode --suite full --q 1 --heads 64/4 --formats bf16,fp8,nvfp4 --cases b64_s10000_q8,b128_s10000_q8 --calls 40 --reps 10 --csv $OUT/dec_q1w_$K.csv > $L/dec_q1w_$K.log 2>&1; t "Q1 64/4 b64,b128 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_q1w_$K.csv | tail -n +2
  timeout 60 ./bench_decode --suite full --heads 64/4 --formats bf16,fp8,nvfp4 --cases b8_s10000_q8,b32_s10000_q8 --calls 40 --reps 10 --csv $OUT/dec_q8w_$K.csv > $L/dec_q8w_$K.log 2>&1; t "Q8 64/4 b8,b32 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_q8w_$K.csv | tail -n +2
  timeout 60 ./bench_decode --suite full --heads 16/1 --formats bf16,fp8,nvfp4 --cases b32_s10000_q8 --calls 40 --reps 10 --csv $OUT/dec_q8n_$K.csv > $L/dec_q8n_$K.log 2>&1; t "Q8 16/1 b32 $K rc=$?"
  cut -d, -f2-9 $OUT/dec_q8n_$K.csv | tail -n +2
done
