#!/bin/bash
# Session 31 run D: NVFP4 lookup with 0x01010101 loaded from the shared block-scale table (4th word)
# instead of rematerialised per prmt (-DFLASHMSA_NV_ONES_TAB, patch ones.patch), exact per-warp and QGMMA kernels.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_indexer_ones --gtest_filter='*DecodeNvfp4Qgmma*:*DecodeE4m3Shapes*' > $L/test.log 2>&1; t "test rc=$? ok=$(grep -c 'OK \]' $L/test.log) $(grep 'FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
for rep in 1 2 3; do
  for v in "" _ones; do
    timeout 100 ./bench_indexer$v --what decode --formats nvfp4 --suite full --reps 10 --csv $OUT/exact${v}_$rep.csv > $L/exact${v}_$rep.log 2>&1; t "exact$v $rep rc=$?"
    timeout 100 ./bench_indexer$v --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8${v}_$rep.csv > $L/q8${v}_$rep.log 2>&1; t "q8$v $rep rc=$?"
  done
done
