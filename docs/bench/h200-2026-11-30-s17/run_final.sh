#!/bin/bash
# Session 17 final H200 run (HEAD build): every GPU test (indexer also without the
# pre-conversion and with 128-row tiles), compute-sanitizer on the indexer and prefill,
# the CLI check, bench_indexer (prefill, decode suites, top-k), bench_prefill with the
# SDPA peer, pip + pytest, then the 128 prefill benchmark cases through the CLI (indexer
# rate per case; whatever finishes before the limit).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_indexer test_cuda_decode test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
FLASHMSA_INDEXER_PRECONVERT=0 timeout 150 ./test_cuda_indexer > $L/test_ix_pre0.log 2>&1; t "test_cuda_indexer PRECONVERT=0 rc=$? ok=$(grep -c 'OK \]' $L/test_ix_pre0.log)"
FLASHMSA_INDEXER_WIDE=0 timeout 150 ./test_cuda_indexer > $L/test_ix_wide0.log 2>&1; t "test_cuda_indexer WIDE=0 rc=$? ok=$(grep -c 'OK \]' $L/test_ix_wide0.log)"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Prefill*:*ExactTies*' > $L/san_ix.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_ix.log)"
FLASHMSA_INDEXER_PRECONVERT=0 timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Prefill*' > $L/san_ix_pre0.log 2>&1; t "memcheck indexer PRECONVERT=0 rc=$? $(grep 'ERROR SUMMARY' $L/san_ix_pre0.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='*PrefillVarlen*' > $L/race_ix.log 2>&1; t "racecheck indexer rc=$? $(grep 'RACECHECK SUMMARY' $L/race_ix.log)"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 150 ./bench_indexer --reps 10 --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer rc=$?"
grep -E "^prefill|^topk" $OUT/indexer.csv | cut -d, -f1-10
grep -E "b32_s|b64_s|b128_s" $OUT/indexer.csv | cut -d, -f1-9,11 | head -12
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill.csv
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log | tail -8
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
left=$((560 - (SECONDS - T0))); [ $left -gt 30 ] || left=30
timeout $left ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "flashmsa run --workload prefill (128 cases, limit ${left}s) rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed"
tail -3 $L/prefill128.log
