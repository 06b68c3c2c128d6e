#!/bin/bash
# s30 run I (closing checks of the final tree: HEAD f0ec6b3 + review fixes: row_desc's page index for every row,
# ucap clamp, list-index bound; tests: a 1,192-row bucketed case, the tail-unit cases on both plans).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 250 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/tp.log | head -5
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*TailUnits*:*GraphCapture*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool racecheck ./test_cuda_prefill --gtest_filter='*Bucketed*' > $L/racecheck.log 2>&1; t "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tr '\n' ' ')"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/default.json > $L/default.log 2>&1; t "flashmsa run default rc=$? $(tail -1 $L/default.log)"
timeout 200 ./flashmsa run --device cuda --workload prefill --cases 8 --kv-dtype nvfp4 --check --json $OUT/p64.json > $L/p64.log 2>&1; t "flashmsa run prefill 64/4 nvfp4 rc=$? $(tail -1 $L/p64.log)"
for pass in 1 2; do timeout 120 ./bench_prefill --cases 16/1:8192:32768,16/1:8192:0 --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_$pass.csv > $L/pf_$pass.log 2>&1; done
t "bench"; grep -h "^prefill" $L/pf_1.log $L/pf_2.log | cut -c1-140
