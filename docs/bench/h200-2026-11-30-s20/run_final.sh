#!/bin/bash
# Session 20 closing H200 run (HEAD build): every GPU test, sanitizers (incl. racecheck/synccheck
# of the new warpgroup decode scoring kernel), the CLI check, bench_indexer decode + top-k (full and
# low-latency suites) for HEAD and the session-19 build (80c24b4) interleaved, the Triton indexer
# peer side by side; pip + pytest if the device time allows.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
for x in test_cuda_prefill test_cuda_indexer test_cuda_decode test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "Fp8QkPrecision \]" $L/test_cuda_indexer.log | cut -c1-110
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*:*Prefill*:*ExactTies*:*Topk*' > $L/san_ix.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_ix.log)"
timeout 100 $CS --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeE4m3Shapes:CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/race_ix.log 2>&1; t "racecheck indexer decode rc=$? $(grep 'RACECHECK SUMMARY' $L/race_ix.log)"
timeout 100 $CS --tool synccheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeE4m3Shapes' > $L/sync_ix.log 2>&1; t "synccheck indexer decode rc=$? $(grep 'ERROR SUMMARY' $L/sync_ix.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do for v in s19 head; do b=./bench_indexer; [ $v = s19 ] && b=./bench_indexer_s19
  timeout 120 $b --what decode,topk --suite all --reps 10 --csv $OUT/indexer_${v}_$rep.csv > $L/bench_indexer_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
(cd ../bench && timeout 200 python3 triton_indexer_peer.py > $L/peer.log 2>&1); t "triton peer rc=$?"
tail -14 $L/peer.log
if [ $((SECONDS - T0)) -lt 330 ]; then
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 170 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 120 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
fi
