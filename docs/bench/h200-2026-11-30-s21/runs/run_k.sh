#!/bin/bash
# s21 run K (HEAD after the code review): test_cuda_prefill and test_cuda_indexer, racecheck of
# FormatsAndHeadSplits (multi-block scan_single at 8/8 and 16/8), synccheck and memcheck of PlanShapes
# (nsub 32 / 8 / 1 through plan_units' shuffles), the CLI check, bench_prefill at the floor case, pip + pytest.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
for x in test_cuda_prefill test_cuda_indexer; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*PlanShapes*' > $L/sync_pf.log 2>&1; t "synccheck PlanShapes rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 100 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*' > $L/san_pf.log 2>&1; t "memcheck PlanShapes rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 150 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*FormatsAndHeadSplits*' > $L/race_pf.log 2>&1; t "racecheck FormatsAndHeadSplits rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 100 ./bench_prefill --cases 16/1:8192:32768,64/4:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-13 $OUT/prefill.csv
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 150 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
