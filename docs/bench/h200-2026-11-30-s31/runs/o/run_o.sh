#!/bin/bash
# Session 31 run O: after the review-pass tidy (gmma self-test: no dead accumulator init, if constexpr,
# unknown variants rejected; indexer: the QGMMA decode flag computed once): gmma and indexer tests.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
for x in test_cuda_gmma test_cuda_indexer; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
