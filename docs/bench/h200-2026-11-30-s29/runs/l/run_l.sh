#!/bin/bash
# s29 run L: the preconvert rule for 1 index head (pre-convert where a request has 4+ tiles on average).
# test_cuda_indexer (new); bench_indexer --what prefill, base (93f18b0) vs new, 2 interleaved passes;
# flashmsa run on 32 real prefill cases at 16/1 (1 index head, E4M3 index-K) with the rule (new) and with
# FLASHMSA_INDEXER_PRECONVERT=0 (no copy: base's path for 1 head), --check, twice each.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 300 ./test_cuda_indexer > $L/ti.log 2>&1; t "test_cuda_indexer rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/ti.log | tr '\n' ' ')"
for pass in 1 2; do
  for v in base new; do
    timeout 200 ./bench_indexer_$v --what prefill --csv $OUT/ix_${v}_$pass.csv > $L/ix_${v}_$pass.log 2>&1; t "bench $v pass $pass rc=$?"
  done
done
R="run --device cuda --workload prefill --cases 32 --heads 16/1 --index-dtype fp8 --kv-dtype fp8 --check"
for pass in 1 2; do
  timeout 250 ./flashmsa $R --json $OUT/wl_new_$pass.json > $L/wl_new_$pass.log 2>&1; t "flashmsa new rc=$? $(tail -1 $L/wl_new_$pass.log)"
  FLASHMSA_INDEXER_PRECONVERT=0 timeout 250 ./flashmsa $R --json $OUT/wl_nopre_$pass.json > $L/wl_nopre_$pass.log 2>&1; t "flashmsa nopre rc=$? $(tail -1 $L/wl_nopre_$pass.log)"
done
grep -h "^weighted" $L/wl_*.log
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']; rows={}
for v in ('base','new'):
  for i in (1,2):
    for r in csv.DictReader(open(f"{O}/ix_{v}_{i}.csv")):
      if r['kind']=='prefill': rows.setdefault((r['case'],r['format'],r['heads']),{}).setdefault(v,[]).append(float(r['us']))
for k,d in rows.items(): print(k, ' | '.join(f"{v} {st.median(d[v]):.1f} {d[v]}" for v in d))
PY
