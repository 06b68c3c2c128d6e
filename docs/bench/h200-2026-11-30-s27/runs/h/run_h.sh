#!/bin/bash
# s27 run H: what the partial stores and the Q gather cost in energy (timing-only ablation builds, wrong
# results: runs/h/ablate.patch). Floor case, random inputs: single-call times (2 passes, interleaved), then
# energy per call with --energy-ms 2000 for each build.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
F=16/1:8192:32768
for pass in 1 2; do for v in head nostore nogather noboth; do
  b=./bench_prefill; [ $v != head ] && b=./bench_prefill_$v
  timeout 60 $b --cases $F --reps 20 --selection random --kernels kv_outer --csv $OUT/t_${v}_$pass.csv > $L/t_${v}_$pass.log 2>&1
done; done
t "timings"
for v in head nostore nogather noboth; do
  b=./bench_prefill; [ $v != head ] && b=./bench_prefill_$v
  timeout 120 $b --cases $F --reps 5 --selection random --kernels kv_outer --energy-ms 2000 --csv $OUT/e_$v.csv > $L/e_$v.log 2>&1
  t "energy $v rc=$?"
done
python3 - <<'PY'
import csv,os
O=os.environ['OUT']
for v in ('head','nostore','nogather','noboth'):
  for fmt in ('bf16','fp8','nvfp4'):
    ts=[float(r['attention_us'])+float(r['plan_us']) for i in (1,2) for r in csv.DictReader(open(f"{O}/t_{v}_{i}.csv")) if r['format']==fmt]
    us=[float(r['us']) for i in (1,2) for r in csv.DictReader(open(f"{O}/t_{v}_{i}.csv")) if r['format']==fmt]
    e=[r for r in csv.DictReader(open(f"{O}/e_{v}.csv")) if r['format']==fmt][0]
    print(v,fmt,'call us',' '.join(f'{x:.1f}' for x in us),'plan+att us',' '.join(f'{x:.1f}' for x in ts),'| mJ call',e['mj_call'],'plan',e['mj_plan'],'att',e['mj_attention'],'comb',e['mj_combine'],'W',e['watts_call'],'sus',e['us_sustained'])
PY
