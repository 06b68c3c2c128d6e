#!/bin/bash
# Session 16, H200 run A: the QK16 F16-query branch (widen_query) + PDL for the attention
# kernel and the combine; prefill tests, sanitizers, CLI; bench_prefill with graph timing
# (PDL on, then off at the floor shape); the SDPA peer timed the same way.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
grep -B2 -A8 'Failure' $L/test_cuda_prefill.log | head -20
timeout 200 ./bench_prefill --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill_a.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill_a.csv
FLASHMSA_PREFILL_PDL=0 timeout 100 ./bench_prefill --cases 16/1:8192:32768 --reps 6 --selection random --kernels kv_outer --csv $OUT/prefill_a_nopdl.csv > $L/bench_prefill_nopdl.log 2>&1; t "bench_prefill nopdl rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill_a_nopdl.csv
(cd .. && timeout 100 python3 bench/sdpa_peer.py > $L/sdpa_peer.log 2>&1); t "sdpa peer rc=$?"; cat $L/sdpa_peer.log
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_prefill.log)"
timeout 60 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_prefill.log 2>&1; t "racecheck prefill rc=$? $(grep -E 'RACECHECK SUMMARY' $L/race_prefill.log)"
timeout 60 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
