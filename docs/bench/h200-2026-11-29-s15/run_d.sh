#!/bin/bash
# sass_summary.py: docs/bench/h200-2026-11-29-s14/sass_summary.py (copied beside the binaries).
# Session 15, H200 run D: prefill list entries loaded a softmax ahead of the gather;
# decode schedule rule (warp-MMA for one wave of row CTAs or tile M <= 16). Tests,
# prefill bench, decode default-plan bench on the cases the rule moved, ncu stall summary.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for x in test_cuda_prefill test_cuda_decode; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -4 | tr '\n' ' ')"
  grep -B2 -A8 'Failure' $L/$x.log | head -20
done
timeout 200 ./bench_prefill --reps 4 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
timeout 60 ./bench_decode --suite low_latency --heads 64/4 --formats bf16,fp8,nvfp4 --cases b2_s4000_q8,b4_s4000_q8 --calls 60 --reps 10 --csv $OUT/dec_ll.csv > $L/dec_ll.log 2>&1; t "decode low_latency b2,b4 Q8 rc=$?"
cut -d, -f2-9,13 $OUT/dec_ll.csv | tail -n +2
timeout 60 ./bench_decode --suite full --q 1 --heads 64/4 --formats bf16,fp8,nvfp4 --cases b32_s10000_q8,b128_s10000_q8 --calls 40 --reps 10 --csv $OUT/dec_q1.csv > $L/dec_q1.log 2>&1; t "decode Q1 b32,b128 rc=$?"
cut -d, -f2-9,13 $OUT/dec_q1.csv | tail -n +2
timeout 240 ncu --kernel-name regex:prefill_attention --launch-skip 1 --launch-count 1 --set full --import-source no -o $OUT/pa ./bench_prefill --cases 16/1:8192:32768 --reps 3 --selection random --kernels kv_outer > $L/ncu_prefill.log 2>&1; t "ncu prefill rc=$?"
ncu -i $OUT/pa.ncu-rep --page details > $L/pa_details.txt 2>&1
grep -E '^ +(Duration|Executed Instructions  |Issue Slots Busy|Warp Cycles Per Issued|DRAM Throughput|L2 Hit Rate|SM Frequency) ' $L/pa_details.txt | head -12
ncu -i $OUT/pa.ncu-rep --page raw --csv 2>/dev/null > $L/pa_raw.csv
python3 - $L/pa_raw.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1]))); h=r[0]; v=r[2] if len(r)>2 else r[1]
out=[]
for a,b in zip(h,v):
  if a.startswith('smsp__average_warps_issue_stalled') and a.endswith('per_issue_active.ratio'):
    try: out.append((float(b.replace(',','')),a.replace('smsp__average_warps_issue_stalled_','').replace('_per_issue_active.ratio','')))
    except: pass
print(' '.join(f'{a} {x:.2f}' for x,a in sorted(out,reverse=True)[:9]))
PY
ncu -i $OUT/pa.ncu-rep --page source --csv --print-source sass > $L/pa.sass.csv 2>/dev/null
python3 sass_summary.py $L/pa.sass.csv | tail -16
rm -f $OUT/pa.ncu-rep $L/pa_raw.csv $L/*.log
