#!/bin/bash
# s29 run I: the wide-tile prefill scoring kernel without ptxas's injected warpgroup.wait (C7517):
# block 1's accumulators copied (mov) into a separate array at the end of each step, so its row-max
# epilogue under block 0's wgmma reads registers no wgmma defined (-DC7517FIX). Correctness:
# test_cuda_indexer (fix). Timing: bench_indexer --what prefill, base (HEAD) vs fix, 2 interleaved passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 300 ./test_cuda_indexer_fix > $L/ti.log 2>&1; t "test_cuda_indexer (fix) rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/ti.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/ti.log | head -5
for pass in 1 2; do
  for v in base fix; do
    timeout 200 ./bench_indexer_$v --what prefill --csv $OUT/ix_${v}_$pass.csv > $L/ix_${v}_$pass.log 2>&1; t "bench $v pass $pass rc=$?"
  done
done
for v in base fix; do echo "== $v"; grep -h "^prefill" $L/ix_${v}_*.log | sort | awk '{print}' ; done
