#!/bin/bash
# Session 24 run I: review mends (sub_ptr written for empty rows, tighter unit capacity, env parsing): prefill tests, sanitizers incl. initcheck, floor-case bench.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for cfg in "" "FLASHMSA_PREFILL_TAIL_TILES=4" "FLASHMSA_PREFILL_TILES_PER_UNIT=1" "FLASHMSA_PLAN_FUSED_SCAN=0"; do
  env $cfg timeout 90 ./test_cuda_prefill > $L/test.log 2>&1; t "test [$cfg] rc=$? ok=$(grep -c 'OK \]' $L/test.log) $(grep 'FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san.log)"
timeout 60 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 60 $CS --tool initcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*' > $L/init.log 2>&1; t "initcheck rc=$? $(grep 'ERROR SUMMARY' $L/init.log)"; grep -m3 -A3 "Uninitialized" $L/init.log | head -12
timeout 60 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/b.csv > $L/b.log 2>&1; t "bench rc=$?"
cut -d, -f1-4,6,8,11-13 $OUT/b.csv
