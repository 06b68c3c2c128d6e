#!/bin/bash
# Session 22 run I: work units dispatched by KV head, then largest first (default) against HEAD (CSR row order),
# at 12 and 16 tiles per unit; prefill tests (also 1 tile per unit), racecheck, memcheck, CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
FLASHMSA_PREFILL_TILES_PER_UNIT=16 timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill_tpu16.log 2>&1; t "test_cuda_prefill tpu 16 rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_tpu16.log)"
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill_tpu1.log 2>&1; t "test_cuda_prefill tpu 1 rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_tpu1.log)"
timeout 120 compute-sanitizer --print-limit 5 --tool racecheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_pf.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/mem_pf.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem_pf.log)"
timeout 100 compute-sanitizer --print-limit 5 --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_pf.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for v in new12 new16 head12; do
    b=bench_prefill; [ $v = head12 ] && b=bench_prefill_head; u=${v: -2}
    FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${v}_$pass.csv > $L/${v}_$pass.log 2>&1; t "$v pass $pass rc=$?"
    cut -d, -f1-4,6,8,11-13 $OUT/${v}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
