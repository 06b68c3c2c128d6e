#!/bin/bash
# s26 run B: 32 sub-counters for warm small plans (new default) and the combine as a loop over rows
# (default grid: one CTA per 2 rows; FLASHMSA_COMBINE_CTAS_PER_SM=k: k CTAs per SM; cr8: 8 rows per CTA).
# Tests (also the combine loop at 1 CTA per SM), memcheck, CLI check; bench base (HEAD) vs variants.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 150 ./test_cuda_prefill > $L/test_pf.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_pf.log) $(grep 'FAILED  \]' $L/test_pf.log | head -3 | tr '\n' ' ')"
FLASHMSA_COMBINE_CTAS_PER_SM=1 timeout 150 ./test_cuda_prefill > $L/test_pf_cps1.log 2>&1; t "test_cuda_prefill combine 1/SM rc=$? ok=$(grep -c 'OK \]' $L/test_pf_cps1.log)"
FLASHMSA_COMBINE_CTAS_PER_SM=16 timeout 150 ./test_cuda_prefill_cr8 > $L/test_pf_cr8.log 2>&1; t "test_cuda_prefill_cr8 16/SM rc=$? ok=$(grep -c 'OK \]' $L/test_pf_cr8.log)"
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*TailUnits*:*LseOff*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 120 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
run() {  # name binary env
  env $3 timeout 90 ./$2 --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_$1_$pass.csv > $L/pf_$1_$pass.log 2>&1
  echo "$1 $pass: $(cut -d, -f1-4,6,8,11-13 $OUT/pf_$1_$pass.csv | tail -n +2 | sed 's/,/ /g' | awk '{printf "%s/%s:%s:%s %s %s (%s/%s/%s) | ", $1,$2,$3,$4,$5,$6,$7,$8,$9}')"
}
for pass in 1 2 3; do
  run base bench_prefill_base X=0
  run new bench_prefill X=0
  run c32 bench_prefill FLASHMSA_COMBINE_CTAS_PER_SM=32
  run c16 bench_prefill FLASHMSA_COMBINE_CTAS_PER_SM=16
  run cr8 bench_prefill_cr8 X=0
  run cr8c16 bench_prefill_cr8 FLASHMSA_COMBINE_CTAS_PER_SM=16
  t "pass $pass"
done
for b in bench_prefill_base bench_prefill; do
  timeout 150 ./$b --reps 10 --selection random,indexer --kernels kv_outer --csv $OUT/full_$b.csv > $L/full_$b.log 2>&1; t "$b full rc=$?"
done
python3 - <<'PY'
import csv,os
O=os.environ['OUT']
def rd(f): return {tuple(r[k] for k in ('hq','hkv','q_len','prefix','selection','format')):(float(r['us']),float(r['plan_us'])) for r in csv.DictReader(open(f))}
b=rd(f"{O}/full_bench_prefill_base.csv"); n=rd(f"{O}/full_bench_prefill.csv")
for k in b: print(' '.join(k), f"base {b[k][0]:8.1f} ({b[k][1]:5.1f})  new {n[k][0]:8.1f} ({n[k][1]:5.1f})  {n[k][0]/b[k][0]:.3f}")
PY
