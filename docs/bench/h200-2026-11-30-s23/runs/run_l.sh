#!/bin/bash
# Session 23 run L: HEAD (8a06c2f + ping-pong switch off) test_cuda_prefill; the ping-pong build (FLASHMSA_PREFILL_PINGPONG=1)
# tests + sanitizers; bench base vs pp interleaved (tpu 24), pp at tpu 32 / 48.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_prefill_pp; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 150 ./test_cuda_prefill_pp > $L/test_pp_tpu1.log 2>&1; t "pp tpu1 rc=$? ok=$(grep -c 'OK \]' $L/test_pp_tpu1.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for b in bench_prefill bench_prefill_pp; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
for u in 32 48; do
  FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 80 ./bench_prefill_pp --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pp_tpu$u.csv > $L/pp_tpu$u.log 2>&1; t "pp tpu $u rc=$?"
  cut -d, -f1-4,6,8 $OUT/pp_tpu$u.csv | tail -n +2 | paste -sd' '
done
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool racecheck ./test_cuda_prefill_pp --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_pp.log 2>&1; t "racecheck pp rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pp.log)"
timeout 100 $CS --tool synccheck ./test_cuda_prefill_pp --gtest_filter='*LseOff*' > $L/sync_pp.log 2>&1; t "synccheck pp rc=$? $(grep 'ERROR SUMMARY' $L/sync_pp.log)"
