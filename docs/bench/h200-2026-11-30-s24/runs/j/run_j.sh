#!/bin/bash
# Session 24 run J: Q8RS variant (E4M3 query rows, register-sourced Q K^T, no F16 copy) vs HEAD.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for cfg in "" "FLASHMSA_PREFILL_TILES_PER_UNIT=1" "FLASHMSA_PREFILL_TAIL_TILES=4"; do
  env $cfg timeout 60 ./test_cuda_prefill_rs > $L/test.log 2>&1; t "rs test [$cfg] rc=$? ok=$(grep -c 'OK \]' $L/test.log) $(grep 'FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
done
grep -m4 "first bad\|max_abs\|Failure" $L/test.log | head -4
C=16/1:8192:32768,64/4:8192:32768,16/1:16384:114688
for pass in 1 2; do for v in base rs; do B=./bench_prefill; [ $v = rs ] && B=./bench_prefill_rs
  timeout 60 $B --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,5,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
timeout 50 $CS --tool memcheck ./test_cuda_prefill_rs --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san.log)"
timeout 50 $CS --tool racecheck ./test_cuda_prefill_rs --gtest_filter='*PlanShapes*:*LseOff*' > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
