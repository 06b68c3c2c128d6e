#!/bin/bash
# s30 run L: after the review cleanup (one D1 helper for both count kernels, the request lookup not repeated,
# one timeline-stamp helper). test_cuda_prefill, memcheck, and two bench passes of the 16/1 shapes.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 250 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*MissingOwnPage*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
for pass in 1 2; do timeout 120 ./bench_prefill --cases 16/1:8192:32768,16/1:8192:0 --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_$pass.csv > $L/pf_$pass.log 2>&1; done
t "bench"; grep -h "^prefill" $L/pf_1.log $L/pf_2.log | cut -c1-150
