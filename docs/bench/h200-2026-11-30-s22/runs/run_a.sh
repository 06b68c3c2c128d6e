#!/bin/bash
# Session 22 run A: the TMA-store epilogue (default) against the 16-byte-store build (bench_prefill_st16):
# test_cuda_prefill, sanitizers, then bench_prefill interleaved, three passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/san_pf.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 120 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_pf.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 80 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_pf.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for pass in 1 2; do
  for b in bench_prefill bench_prefill_st16; do
    timeout 100 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8,9,11-13 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
