#!/bin/bash
# Session 16, final run 2 on the kept build (run-I kernel, PTX-identical): prefill tests
# and sanitizers, the CLI check, the prefill benchmark with the SDPA peer, the Python
# extension and its tests. (Decode, indexer, cache, fused: unchanged since run_final.sh.)
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results2.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 150 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 120 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 120 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_prefill.log 2>&1; t "synccheck prefill rc=$? $(grep -E 'ERROR SUMMARY' $L/sync_prefill.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill.csv
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 200 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
