#!/bin/bash
# Session 26 closing H200 run (the working tree's build, binaries in .devbin/): every GPU test (prefill also with
# tail 4 and at 1 tile per unit), sanitizers, the CLI check, bench_prefill against the session-25 HEAD build
# (bench_prefill_base: 8610d70 plus the FLASHMSA_PLAN_SUB_COUNTERS hook, default unchanged; five cases, three
# interleaved passes), the full bench suite with the SDPA peer;
# part 2 ("2"): pip install + pytest, then the 128 prefill cases through the CLI with the time left.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
if [ "$1" != 2 ]; then
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_indexer test_cuda_decode test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep -q "PASSED.*10 tests" $L/test_cuda_prefill.log || { t "prefill tests failed: stop"; exit 1; }
FLASHMSA_PREFILL_TAIL_TILES=4 timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill_tail4.log 2>&1; t "test_cuda_prefill FLASHMSA_PREFILL_TAIL_TILES=4 rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_tail4.log)"
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 100 ./test_cuda_prefill > $L/test_cuda_prefill_tpu1.log 2>&1; t "test_cuda_prefill tiles/unit 1 rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_tpu1.log)"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*:*TailUnits*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/race_pf.log 2>&1; t "racecheck prefill rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_pf.log 2>&1; t "synccheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 60 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*Nvfp4*:*SingleSplit*' > $L/san_dec.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_dec.log)"
timeout 120 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do
  for b in bench_prefill_base bench_prefill; do
    timeout 60 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
timeout 200 ./bench_prefill --reps 10 --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-8,10-13 $OUT/prefill.csv | grep -E "random|hq"
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; tail -4 $L/sdpa_peer.log
exit 0
fi
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 220 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
left=$((420 - (SECONDS - T0))); [ $left -gt 20 ] || left=20
timeout $left ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "flashmsa run --workload prefill (128 cases, limit ${left}s) rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed"
tail -3 $L/prefill128.log
