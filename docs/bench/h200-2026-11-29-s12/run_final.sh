#!/bin/bash
# Session 12 final H200 run: every GPU test, sanitizers, python install + pytest, CLI check, benchmarks.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_gmma test_cuda_decode test_cuda_indexer test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep -E "Fp8QkPrecision \]" $L/test_cuda_indexer.log
CS="compute-sanitizer --print-limit 5"
timeout 90 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*SixteenSplits*:*Padding*:*Swizzled*' > $L/san_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_decode.log)"
timeout 60 $CS --tool racecheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*' > $L/race_decode.log 2>&1; t "racecheck decode rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_decode.log)"
timeout 60 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='CudaPrefill.LseOff*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 60 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='CudaPrefill.LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 90 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*DecodeMtp*:*TopkSelectDevice*:*DecodePlan*:*DecodeFormats*' > $L/san_indexer.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_indexer.log)"
timeout 60 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='*DecodeFormats*' > $L/race_indexer.log 2>&1; t "racecheck indexer rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_indexer.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 150 ./bench_decode --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode.csv > $L/bench_decode.log 2>&1; t "bench_decode rc=$?"
timeout 60 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1.csv > $L/bench_decode_q1.log 2>&1; t "bench_decode q1 rc=$?"
timeout 150 ./bench_indexer --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer rc=$?"
timeout 150 ./bench_prefill --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
(cd .. && timeout 60 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; tail -8 $L/sdpa_peer.log
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 150 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 200 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
