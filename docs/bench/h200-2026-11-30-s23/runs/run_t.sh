#!/bin/bash
# Session 23 run T: the producer warpgroup (384 threads; consumers 232 registers, producer 40) against HEAD.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 60 ./test_cuda_prefill_pw > $L/test_pw.log 2>&1; t "test pw rc=$? ok=$(grep -c 'OK \]' $L/test_pw.log) $(grep 'FAILED  \]' $L/test_pw.log | head -3 | tr '\n' ' ')"
grep -m3 -E "first bad|Failure" $L/test_pw.log
for u in 1 2; do FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./test_cuda_prefill_pw > $L/test_pw_tpu$u.log 2>&1; t "pw tpu$u rc=$? ok=$(grep -c 'OK \]' $L/test_pw_tpu$u.log)"; done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for b in bench_prefill bench_prefill_pw; do
    timeout 60 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8,12 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
CS="compute-sanitizer --print-limit 5"
timeout 90 $CS --tool racecheck ./test_cuda_prefill_pw --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_pw.log 2>&1; t "racecheck pw rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pw.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill_pw --gtest_filter='*LseOff*' > $L/sync_pw.log 2>&1; t "synccheck pw rc=$? $(grep 'ERROR SUMMARY' $L/sync_pw.log)"
