#!/bin/bash
# s26 run C: 32 sub-counters for warm small plans (new default) against the HEAD build (base);
# fs64k: fused scan up to 65,536 sub-counters (so 64/4 and 16/1 16384 also take 32 sub-counters);
# s32: new with FLASHMSA_PLAN_SUB_COUNTERS=32 (scan kernels where the plan is too big to fuse);
# cr1: one (query, head) row per combine CTA. Tests, memcheck, CLI check, 3 interleaved passes, full suite.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
for x in test_cuda_prefill test_cuda_prefill_fs64k; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
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
  run fs64k bench_prefill_fs64k X=0
  run s32 bench_prefill FLASHMSA_PLAN_SUB_COUNTERS=32
  run cr1 bench_prefill_cr1 X=0
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
def med(name, case, fmt, col):
  v=sorted(float(r[col]) for i in (1,2,3) for r in csv.DictReader(open(f"{O}/pf_{name}_{i}.csv")) if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt)
  return f"{v[0]:.1f}-{v[-1]:.1f}"
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    print(case, fmt, ' | '.join(f"{n} {med(n,case,fmt,'us')} (plan {med(n,case,fmt,'plan_us')}, comb {med(n,case,fmt,'combine_us')})" for n in ('base','new','fs64k','s32','cr1')))
PY
