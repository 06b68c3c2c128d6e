#!/bin/bash
# s27 run J: the upper bound of "the local page inside the combine": a timing-only build whose plan drops
# every query's local page (runs/j/ablate3.patch; the attention kernel then writes and the combine reads
# 15 partials per query, and no local tiles run). Random inputs: single-call times (3 interleaved passes) at
# the floor case, (16/1, 8192, 0) and (64/4, 8192, 32768), then energy at the floor case.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for pass in 1 2 3; do for v in head nolocal; do
  b=./bench_prefill; [ $v != head ] && b=./bench_prefill_$v
  timeout 60 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/t_${v}_$pass.csv > $L/t_${v}_$pass.log 2>&1
done; done
t "timings"
for v in head nolocal; do
  b=./bench_prefill; [ $v != head ] && b=./bench_prefill_$v
  timeout 120 $b --cases 16/1:8192:32768 --reps 5 --selection random --kernels kv_outer --energy-ms 2000 --csv $OUT/e_$v.csv > $L/e_$v.log 2>&1
  t "energy $v rc=$?"
done
python3 - <<'PY'
import csv,os
O=os.environ['OUT']
for case in ('16/1:8192:32768','16/1:8192:0','64/4:8192:32768'):
  for v in ('head','nolocal'):
    for fmt in ('bf16','fp8','nvfp4'):
      x=[float(r['us']) for i in (1,2,3) for r in csv.DictReader(open(f"{O}/t_{v}_{i}.csv")) if r['format']==fmt and f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case]
      line=f"{case} {v:8s} {fmt:5s} call {' '.join(f'{a:.1f}' for a in x)}"
      if case=='16/1:8192:32768':
        e=[r for r in csv.DictReader(open(f"{O}/e_{v}.csv")) if r['format']==fmt][0]
        line+=f" | mJ {e['mj_call']} att {e['mj_attention']} comb {e['mj_combine']} sus {e['us_sustained']}"
      print(line)
PY
