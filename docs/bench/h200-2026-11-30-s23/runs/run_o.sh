#!/bin/bash
# Session 23 run O: attention-kernel trims. v1 = ml store after the TMA store, no second proxy fence per step, no
# division in the epilogue; v2 = v1 + mask limits loaded a step ahead; v3 = v2 + plan-resolved int4 list entries.
# Tests of each, sanitizers on v3, bench base/v1/v2/v3 interleaved (two passes).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_prefill_v1 test_cuda_prefill_v2 test_cuda_prefill_v3; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
for u in 1 2; do FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 150 ./test_cuda_prefill_v3 > $L/test_v3_tpu$u.log 2>&1; t "v3 tpu$u rc=$? ok=$(grep -c 'OK \]' $L/test_v3_tpu$u.log)"; done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for b in bench_prefill bench_prefill_v1 bench_prefill_v2 bench_prefill_v3; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
grep -h "16/1 q_len   8192 prefix   32768" $L/bench_prefill*_2.log
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool memcheck ./test_cuda_prefill_v3 --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san_v3.log 2>&1; t "memcheck v3 rc=$? $(grep 'ERROR SUMMARY' $L/san_v3.log)"
timeout 150 $CS --tool racecheck ./test_cuda_prefill_v3 --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_v3.log 2>&1; t "racecheck v3 rc=$? $(grep 'RACECHECK SUMMARY' $L/race_v3.log)"
timeout 100 $CS --tool synccheck ./test_cuda_prefill_v3 --gtest_filter='*LseOff*' > $L/sync_v3.log 2>&1; t "synccheck v3 rc=$? $(grep 'ERROR SUMMARY' $L/sync_v3.log)"
