#!/bin/bash
# sass_summary.py: docs/bench/h200-2026-11-29-s14/sass_summary.py (copied beside the binaries).
# Session 16, H200 run C: ncu of the prefill attention kernel (as run F of session 15),
# BF16 and FP8 (QK16), (16/1, 8192, 32768): stalls and SASS hot spots.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
for SK in 2:bf16; do
  skip=${SK%%:*}; name=${SK##*:}
  timeout 240 ncu --kernel-name regex:prefill_attention --launch-skip $skip --launch-count 1 --set full --import-source no -o $OUT/pa_$name ./bench_prefill --cases 16/1:8192:32768 --reps 1 --selection random --kernels kv_outer > $L/ncu_$name.log 2>&1; t "ncu $name rc=$?"
  ncu -i $OUT/pa_$name.ncu-rep --page details > $L/pa_${name}_details.txt 2>&1
  grep -E '^ +(Duration|Executed Instructions  |Issue Slots Busy|Warp Cycles Per Issued|DRAM Throughput|L2 Hit Rate|Registers Per Thread) ' $L/pa_${name}_details.txt | head -12
  ncu -i $OUT/pa_$name.ncu-rep --page raw --csv 2>/dev/null > $OUT/raw.csv
  python3 - $OUT/raw.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1]))); h=r[0]; v=r[2] if len(r)>2 else r[1]
out=[]
for a,b in zip(h,v):
  if a.startswith('smsp__average_warps_issue_stalled') and a.endswith('per_issue_active.ratio'):
    try: out.append((float(b.replace(',','')),a.replace('smsp__average_warps_issue_stalled_','').replace('_per_issue_active.ratio','')))
    except: pass
print(' '.join(f'{a} {x:.2f}' for x,a in sorted(out,reverse=True)[:10]))
for key in ['sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active','sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active','dram__bytes_read.sum','dram__bytes_write.sum']:
  for a,b in zip(h,v):
    if a==key: print(a,b)
PY
  rm -f $OUT/raw.csv
  ncu -i $OUT/pa_$name.ncu-rep --page source --csv --print-source sass > $L/pa_$name.sass.csv 2>/dev/null
  python3 sass_summary.py $L/pa_$name.sass.csv 40 | tail -40
  rm -f $OUT/pa_$name.ncu-rep
done
