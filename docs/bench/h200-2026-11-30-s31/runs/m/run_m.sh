#!/bin/bash
# Session 31 run M: the QGMMA tests now also check which scoring kernel ran
# (cuda::indexer_last_score_kernel); the whole indexer test binary.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer > $L/test.log 2>&1; t "test_cuda_indexer rc=$? $(grep 'PASSED\|FAILED  \]' $L/test.log | head -3 | tr '\n' ' ')"
grep "Qgmma" $L/test.log | grep "OK \]\|FAILED"
grep -m5 "expected scoring kernel\|Failure" $L/test.log
