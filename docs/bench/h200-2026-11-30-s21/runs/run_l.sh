#!/bin/bash
# s21 run L: the final review mend (plan_units' sub-counter fallback as a loop): test_cuda_prefill,
# synccheck of PlanShapes, bench_prefill at the floor case.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 100 ./test_cuda_prefill > $L/test_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_prefill.log) $(grep 'FAILED  \]' $L/test_prefill.log | head -3 | tr '\n' ' ')"
timeout 60 compute-sanitizer --tool synccheck ./test_cuda_prefill --gtest_filter='*PlanShapes*' > $L/sync_pf.log 2>&1; t "synccheck PlanShapes rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 60 ./bench_prefill --cases 16/1:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
