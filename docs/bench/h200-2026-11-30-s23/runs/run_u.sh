#!/bin/bash
# Session 23 run U: the split build (ff73221: prefill_plan.cu / prefill_attention.cu / prefill_kvouter.cu; PTX of all
# kernels unchanged): prefill tests, QGMMA opt-in, sanitizers, CLI check, bench, pip + pytest, the 128 prefill cases.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 90 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
for u in 1 2; do FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 90 ./test_cuda_prefill > $L/test_tpu$u.log 2>&1; t "tpu$u rc=$? ok=$(grep -c 'OK \]' $L/test_tpu$u.log)"; done
FLASHMSA_FP8_QK=e4m3 timeout 90 ./test_cuda_prefill > $L/test_qgmma.log 2>&1; t "qgmma rc=$? ok=$(grep -c 'OK \]' $L/test_qgmma.log) failed_tests=$(grep -c '^\[  FAILED  \] Cuda' $L/test_qgmma.log)"
grep -E "first bad" $L/test_qgmma.log | md5sum
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san_pf.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/race_pf.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_pf.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/bench_prefill_$pass.csv > $L/bench_prefill_$pass.log 2>&1; t "bench pass $pass rc=$?"
  cut -d, -f1-4,6,8 $OUT/bench_prefill_$pass.csv | tail -n +2 | paste -sd' '
done
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 150 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
left=$((480 - (SECONDS - T0))); [ $left -gt 20 ] || left=20
timeout $left ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "prefill 128 (limit ${left}s) rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed; $(tail -1 $L/prefill128.log)"
