#!/bin/bash
# Session 22 run H: work units dispatched largest first (counting sort by size, default) against HEAD (CSR row order),
# at 12 and 16 tiles per unit; test_cuda_prefill and racecheck of the new plan code.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill_tpu1.log 2>&1; t "test_cuda_prefill tpu 1 rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_tpu1.log)"
timeout 120 compute-sanitizer --print-limit 5 --tool racecheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_pf.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/mem_pf.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem_pf.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for pass in 1 2; do
  for b in bench_prefill bench_prefill_head; do
    for u in 12 16; do
      FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_u${u}_$pass.csv > $L/${b}_u${u}_$pass.log 2>&1; t "$b tpu $u pass $pass rc=$?"
      cut -d, -f1-4,6,8,11-13 $OUT/${b}_u${u}_$pass.csv | tail -n +2 | paste -sd' '
    done
  done
done
