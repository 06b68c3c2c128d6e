#!/bin/bash
# Session 16 final H200 run: every GPU test (decode also with the combine-kernel merge,
# prefill also with the QGMMA opt-in, which is outside D8 and expected to fail some
# NVFP4 elements), compute-sanitizer on decode and prefill, the CLI check, then the
# benchmarks: prefill (graph timing; the run-I build beside the final one at the floor
# shape; the QGMMA opt-in) with the SDPA peer, decode with the Triton peer; then the
# Python extension and its tests.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
# Few files come back from $OUT: everything leaves as one archive.
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for x in test_cuda_prefill test_cuda_decode test_cuda_gmma test_cuda_indexer test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 120 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 120 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_prefill.log 2>&1; t "synccheck prefill rc=$? $(grep -E 'ERROR SUMMARY' $L/sync_prefill.log)"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*:*Padding*:*Messy*:*OddTokenStride*' > $L/san_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_decode.log)"
timeout 90 $CS --tool racecheck ./test_cuda_decode --gtest_filter='*SixteenSplitsSmall*' > $L/race_decode.log 2>&1; t "racecheck decode rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_decode.log)"
FLASHMSA_FP8_QK=e4m3 timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill_e4m3.log 2>&1; t "test_cuda_prefill FLASHMSA_FP8_QK=e4m3 (outside D8) rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill_e4m3.log) $(grep -h 'first bad' $L/test_cuda_prefill_e4m3.log | head -2 | tr '\n' ' ')"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill.csv
for b in bench_prefill_i bench_prefill; do timeout 60 ./$b --cases 16/1:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/ab_$b.csv > /dev/null 2>&1; echo "A/B $b: $(cut -d, -f6,8,11-13 $OUT/ab_$b.csv | tail -3 | tr '\n' ' ')"; done
FLASHMSA_FP8_QK=e4m3 timeout 60 ./bench_prefill --cases 16/1:8192:32768 --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill_qgmma.csv > /dev/null 2>&1; echo "QGMMA opt-in: $(cut -d, -f6,8,9,11-13 $OUT/prefill_qgmma.csv | tail -2 | tr '\n' ' ')"
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log
timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1.csv > $L/bench_decode_q1.log 2>&1; t "bench_decode q1 rc=$?"
grep -E 'b1_s4000|b4_s4000' $OUT/decode_lowlat_q1.csv | cut -d, -f2-9,13
timeout 200 ./bench_decode --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode.csv > $L/bench_decode.log 2>&1; t "bench_decode all rc=$?"
grep -E 'full,(b32_s10000|b128_s10000|b64_s50000)|low_latency,(b1_s4000|b2_s4000|b4_s4000)' $OUT/decode.csv | cut -d, -f1-9,11,12,13
(cd .. && timeout 150 python3 bench/triton_decode_peer.py > $L/triton_decode_peer.log 2>&1); t "triton decode peer rc=$?"; grep -v "^check" $L/triton_decode_peer.log | head -30
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 200 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
