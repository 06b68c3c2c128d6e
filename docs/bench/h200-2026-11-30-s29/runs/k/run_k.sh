#!/bin/bash
# s29 run K: the prefill indexer's pre-converted E4M3 copy for 1 index head too (-DPRE_MIN_HEADS=1; the
# library pre-converts from 2 heads). Correctness: test_cuda_indexer (pre1). Timing: bench_indexer --what
# prefill, base (HEAD 93f18b0) vs pre1, 3 interleaved passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 300 ./test_cuda_indexer_pre1 > $L/ti.log 2>&1; t "test_cuda_indexer (pre1) rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/ti.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/ti.log | head -5
for pass in 1 2 3; do
  for v in base pre1; do
    timeout 200 ./bench_indexer_$v --what prefill --csv $OUT/ix_${v}_$pass.csv > $L/ix_${v}_$pass.log 2>&1; t "bench $v pass $pass rc=$?"
  done
done
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']; rows={}
for v in ('base','pre1'):
  for i in (1,2,3):
    for r in csv.DictReader(open(f"{O}/ix_{v}_{i}.csv")):
      if r['kind']=='prefill': rows.setdefault((r['case'],r['format'],r['heads']),{}).setdefault(v,[]).append(float(r['us']))
for k,d in rows.items(): print(k, ' | '.join(f"{v} {st.median(d[v]):.1f} {d[v]}" for v in d))
PY
