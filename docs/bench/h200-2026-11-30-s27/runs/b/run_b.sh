#!/bin/bash
# s27 run B: clocks and power during the floor case on constant vs random inputs (nvidia-smi
# sampled every 20 ms), then unit-size and tail sweeps on random inputs (env overrides), 3 passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
F=16/1:8192:32768
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 20 > $L/smi.csv 2>&1 &
SMI=$!
for d in constant random constant random; do
  echo "START $d $(date +%H:%M:%S.%N)" >> $L/marks.txt
  timeout 60 ./bench_prefill --cases $F --reps 300 --selection random --kernels kv_outer --data $d --csv $OUT/pw_$d.csv > $L/pw_$d.log 2>&1
  echo "END $d $(date +%H:%M:%S.%N)" >> $L/marks.txt
  sleep 1
done
kill $SMI
t "power runs"
for pass in 1 2 3; do
  for v in def t24 t28 t36 tail2 tail6 tail0; do
    unset FLASHMSA_PREFILL_TILES_PER_UNIT FLASHMSA_PREFILL_TAIL_TILES
    case $v in t24) export FLASHMSA_PREFILL_TILES_PER_UNIT=24;; t28) export FLASHMSA_PREFILL_TILES_PER_UNIT=28;; t36) export FLASHMSA_PREFILL_TILES_PER_UNIT=36;;
      tail2) export FLASHMSA_PREFILL_TAIL_TILES=2;; tail6) export FLASHMSA_PREFILL_TAIL_TILES=6;; tail0) export FLASHMSA_PREFILL_TAIL_TILES=0;; esac
    timeout 60 ./bench_prefill --cases $F --reps 20 --selection random --kernels kv_outer --csv $OUT/sw_${v}_$pass.csv > $L/sw_${v}_$pass.log 2>&1
  done
done
unset FLASHMSA_PREFILL_TILES_PER_UNIT FLASHMSA_PREFILL_TAIL_TILES
t "sweeps"
python3 - <<'PY'
import csv,os,statistics as st,datetime as dt
O=os.environ['OUT']
marks=[l.split() for l in open(f"{O}/logs/marks.txt")]
def ts(s): return dt.datetime.strptime(s[:15],"%H:%M:%S.%f")
smi=[]
for l in open(f"{O}/logs/smi.csv"):
  p=[x.strip() for x in l.split(',')]
  try: smi.append((ts(p[0].split()[1]),float(p[1].split()[0]),float(p[3].split()[0]),p[4]))
  except Exception: pass
for i in range(0,len(marks),2):
  a,b=ts(marks[i][2]),ts(marks[i+1][2]); d=marks[i][1]
  x=[s for s in smi if a<s[0]<b]
  busy=[s for s in x if s[2]>300]
  if busy: print(d,'samples',len(busy),'sm MHz med',st.median(s[1] for s in busy),'min',min(s[1] for s in busy),'W med',st.median(s[2] for s in busy),'max',max(s[2] for s in busy),'reasons',sorted(set(s[3] for s in busy))[:4])
for d in ('constant','random'):
  for r in csv.DictReader(open(f"{O}/pw_{d}.csv")): print('pw',d,r['format'],r['us'],r['plan_us'],r['attention_us'],r['combine_us'])
for v in ('def','t24','t28','t36','tail2','tail6','tail0'):
  for fmt in ('bf16','fp8','nvfp4'):
    x=[float(r['us']) for i in (1,2,3) for r in csv.DictReader(open(f"{O}/sw_{v}_{i}.csv")) if r['format']==fmt]
    print('sw',v,fmt,' '.join(f"{a:.1f}" for a in x),'med',f"{st.median(x):.1f}")
PY
