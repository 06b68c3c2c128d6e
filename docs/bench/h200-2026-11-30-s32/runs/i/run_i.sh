#!/bin/bash
# Session 32 run I: ping-pong of the two consumer warpgroups (FLASHMSA_DECODE_PINGPONG=1) against none (bench_decode_npp),
# two interleaved passes; decode tests and sanitizers on the ping-pong build.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.SingleSplitLargeBatch:CudaDecode.NarrowTopk' > $L/guard.log 2>&1; rc=$?; t "guard rc=$rc $(grep 'PASSED\|FAILED' $L/guard.log | head -5 | tr '\n' ' ')"
if [ $rc -ne 0 ]; then exit 1; fi
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b128_s100000_q8,b128_s1000_q8,b8_s10000_q8,b32_s1000_q8
for rep in 1 2; do
  timeout 100 ./bench_decode --suite full --cases $C --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/pp$rep.csv > $L/pp$rep.log 2>&1; t "bench pp $rep rc=$?"
  timeout 100 ./bench_decode_npp --suite full --cases $C --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/npp$rep.csv > $L/npp$rep.log 2>&1; t "bench npp $rep rc=$?"
done
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -5 | tr '\n' ' ')"
timeout 60 ./test_cuda_prefill --gtest_filter='*QueryOuter*' > $L/prefill_qo.log 2>&1; t "prefill qo rc=$? $(grep 'PASSED\|FAILED  \]' $L/prefill_qo.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool racecheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/race.log)"
timeout 100 $CS --tool synccheck ./test_cuda_decode --gtest_filter=CudaDecode.SingleSplitLargeBatch > $L/sync.log 2>&1; t "synccheck rc=$? $(grep 'ERROR SUMMARY' $L/sync.log)"
