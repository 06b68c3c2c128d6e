#!/bin/bash
# Session 18 final H200 run (HEAD build): every GPU test (indexer also without the
# pre-conversion), compute-sanitizer on the indexer (decode and prefill), the decode and
# prefill attention, the CLI check, bench_indexer (prefill, decode suites, top-k),
# bench_decode (the NVFP4 lookups changed there too), bench_prefill, pip + pytest, then
# the 128 prefill benchmark cases through the CLI with the E4M3 index (indexer rate per
# case; whatever finishes before the limit).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_indexer test_cuda_decode test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
FLASHMSA_INDEXER_PRECONVERT=0 timeout 150 ./test_cuda_indexer > $L/test_ix_pre0.log 2>&1; t "test_cuda_indexer PRECONVERT=0 rc=$? ok=$(grep -c 'OK \]' $L/test_ix_pre0.log)"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*:*Prefill*:*ExactTies*' > $L/san_ix.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_ix.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='*PrefillVarlen*' > $L/race_ix.log 2>&1; t "racecheck indexer rc=$? $(grep 'RACECHECK SUMMARY' $L/race_ix.log)"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*Nvfp4*' > $L/san_dec.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_dec.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 150 ./bench_indexer --reps 10 --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer rc=$?"
grep -E "^prefill|^topk" $OUT/indexer.csv | cut -d, -f1-10
grep dscore $OUT/indexer.csv | grep -E "b32_s5|b64_s5|b128_s5|b32_s1|b64_s1|b128_s1|_s2" | grep -v "s1000_" | cut -d, -f2,3,8,11
timeout 200 ./bench_decode --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode.csv > $L/bench_decode.log 2>&1; t "bench_decode all rc=$?"
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill.csv | head -20
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
left=$((540 - (SECONDS - T0))); [ $left -gt 30 ] || left=30
timeout $left ./flashmsa run --device cuda --workload prefill --index-dtype fp8 --no-check --json $OUT/prefill128_fp8idx.json > $L/prefill128.log 2>&1; t "flashmsa run --workload prefill --index-dtype fp8 (128 cases, limit ${left}s) rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed"
tail -3 $L/prefill128.log
