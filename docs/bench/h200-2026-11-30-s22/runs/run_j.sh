#!/bin/bash
# Session 22 run J (closing, prefill at HEAD: dispatch by KV head then largest first, 16 tiles per unit):
# test_cuda_prefill, memcheck, CLI check, bench_prefill (both selections) and the SDPA peer.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*LseOff*' > $L/mem_pf.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/mem_pf.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 200 ./bench_prefill --reps 10 --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-9,11-13 $OUT/prefill.csv | grep -E "random|hq"
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; tail -3 $L/sdpa_peer.log
