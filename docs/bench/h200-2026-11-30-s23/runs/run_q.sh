#!/bin/bash
# Session 23 run Q: v6 = v5 + the epilogue split around the next tile's Q K^T wait (stmatrix before, proxy fence + TMA
# store + (m c, l) store after). Tests (also at 1 and 2 tiles per unit), sanitizers, bench base/v5/v6 interleaved.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_prefill_v6 > $L/test_v6.log 2>&1; t "test v6 rc=$? ok=$(grep -c 'OK \]' $L/test_v6.log) $(grep 'FAILED  \]' $L/test_v6.log | head -3 | tr '\n' ' ')"
for u in 1 2; do FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 150 ./test_cuda_prefill_v6 > $L/test_v6_tpu$u.log 2>&1; t "v6 tpu$u rc=$? ok=$(grep -c 'OK \]' $L/test_v6_tpu$u.log)"; done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do
  for b in bench_prefill bench_prefill_v5 bench_prefill_v6; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
grep -h "16/1 q_len   8192 prefix   32768" $L/bench_prefill*_2.log
CS="compute-sanitizer --print-limit 5"
timeout 150 $CS --tool memcheck ./test_cuda_prefill_v6 --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san_v6.log 2>&1; t "memcheck v6 rc=$? $(grep 'ERROR SUMMARY' $L/san_v6.log)"
timeout 150 $CS --tool racecheck ./test_cuda_prefill_v6 --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_v6.log 2>&1; t "racecheck v6 rc=$? $(grep 'RACECHECK SUMMARY' $L/race_v6.log)"
timeout 100 $CS --tool synccheck ./test_cuda_prefill_v6 --gtest_filter='*LseOff*' > $L/sync_v6.log 2>&1; t "synccheck v6 rc=$? $(grep 'ERROR SUMMARY' $L/sync_v6.log)"
