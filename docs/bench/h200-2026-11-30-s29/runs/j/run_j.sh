#!/bin/bash
# s29 run J: run I's change on the copied-pages path only (the library's form): test_cuda_indexer, memcheck on PrefillVarlen, and bench_indexer --what prefill, base (HEAD 2d62769) vs new, 3 interleaved passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 300 ./test_cuda_indexer > $L/ti.log 2>&1; t "test_cuda_indexer rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/ti.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/ti.log | head -5
timeout 150 compute-sanitizer --tool memcheck ./test_cuda_indexer --gtest_filter='*PrefillVarlen*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
for pass in 1 2 3; do
  for v in base new; do
    timeout 200 ./bench_indexer_$v --what prefill --csv $OUT/ix_${v}_$pass.csv > $L/ix_${v}_$pass.log 2>&1; t "bench $v pass $pass rc=$?"
  done
done
for v in base new; do echo "== $v"; grep -h "^prefill" $L/ix_${v}_*.log | sort | awk '{print}' ; done
