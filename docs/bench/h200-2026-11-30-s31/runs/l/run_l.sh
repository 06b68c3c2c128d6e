#!/bin/bash
# Session 31 run L: the QGMMA indexer tests after their harness was factored (QgmmaCases).
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer --gtest_filter='*Qgmma*:*Fp8QkPrecision*' > $L/test.log 2>&1; t "test rc=$? $(grep 'PASSED\|FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
grep "OK \]" $L/test.log
