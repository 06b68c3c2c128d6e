#!/bin/bash
# Session 31 run B: QGMMA NVFP4 decode scorer, both m64 tiles of a page in flight (FLASHMSA_DECWG_Q8_PIPE=1,
# patch pipe.patch) against one tile at a time; tests of the pipelined build; interleaved bench passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_indexer_pipe --gtest_filter='*DecodeNvfp4Qgmma*:*Fp8QkPrecision*' > $L/test.log 2>&1; t "test rc=$? ok=$(grep -c 'OK \]' $L/test.log) $(grep 'FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
grep "Fp8QkPrecision \]" $L/test.log | cut -c1-110
for rep in 1 2 3; do
  timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --csv $OUT/exact_$rep.csv > $L/exact_$rep.log 2>&1; t "exact $rep rc=$?"
  timeout 100 ./bench_indexer --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8_$rep.csv > $L/q8_$rep.log 2>&1; t "q8 $rep rc=$?"
  timeout 100 ./bench_indexer_pipe --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8pipe_$rep.csv > $L/q8pipe_$rep.log 2>&1; t "q8pipe $rep rc=$?"
done
