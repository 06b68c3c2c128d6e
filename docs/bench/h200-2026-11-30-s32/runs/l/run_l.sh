#!/bin/bash
# Session 32 run L (final tree, after the review: CtaTile refactor, comments): decode and query-outer prefill tests;
# sanitizers on the two-consumer (128-row) warp-specialised path with ping-pong (BitwiseDeterministic: FP8, Q 8 x 16 heads),
# then memcheck over every format and head split (FormatsAndHeadSplits); CLI check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.json 2>/dev/null' EXIT
timeout 120 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 30 ./test_cuda_prefill --gtest_filter='*QueryOuter*' > $L/prefill_qo.log 2>&1; t "prefill qo rc=$? $(grep 'PASSED\|FAILED  \]' $L/prefill_qo.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
F=CudaDecode.BitwiseDeterministic
timeout 60 $CS --tool racecheck ./test_cuda_decode --gtest_filter=$F > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 50 $CS --tool synccheck ./test_cuda_decode --gtest_filter=$F > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
timeout 50 $CS --tool memcheck ./test_cuda_decode --gtest_filter=$F > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
timeout 40 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter=CudaDecode.FormatsAndHeadSplits > $L/memcheck_all.log 2>&1; t "memcheck FormatsAndHeadSplits rc=$? $(grep 'ERROR SUMMARY' $L/memcheck_all.log)"
