#!/bin/bash
# Session 25 run D: both sides' conversion loads issued first (kv) against cv (the working tree's default);
# cv at 40 and 48 tiles per unit (env) against its default (32 at the floor case).
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 100 ./test_cuda_prefill_kv > $L/test_pf_kv.log 2>&1; t "test_cuda_prefill_kv rc=$? ok=$(grep -c 'OK \]' $L/test_pf_kv.log) $(grep 'FAILED  \]' $L/test_pf_kv.log | head -3 | tr '\n' ' ')"
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 100 ./test_cuda_prefill_kv > $L/test_pf_kv_tpu1.log 2>&1; t "kv tiles/unit 1 rc=$? ok=$(grep -c 'OK \]' $L/test_pf_kv_tpu1.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do for v in ov cv kv cv40 cv48; do
  B=./bench_prefill_$v; E=""
  case $v in cv40) B=./bench_prefill_cv; E=FLASHMSA_PREFILL_TILES_PER_UNIT=40;; cv48) B=./bench_prefill_cv; E=FLASHMSA_PREFILL_TILES_PER_UNIT=48;; esac
  env $E timeout 60 $B --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | grep -v bf16 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool racecheck ./test_cuda_prefill_kv --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/race_kv.log 2>&1; t "racecheck kv rc=$? $(grep 'RACECHECK SUMMARY' $L/race_kv.log)"
timeout 60 $CS --tool memcheck ./test_cuda_prefill_kv --gtest_filter='*LseOff*:*HeadMajorQuery*:*PlanShapes*' > $L/san_kv.log 2>&1; t "memcheck kv rc=$? $(grep 'ERROR SUMMARY' $L/san_kv.log)"
