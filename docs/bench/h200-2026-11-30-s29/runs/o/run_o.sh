#!/bin/bash
# s29 run O (closing): test_cuda_indexer with the new PrefillOneHeadPreconverted test (the 1-head copy rule, wide
# tiles only), and flashmsa run --device cuda --check (default selection; 8 prefill cases at 16/1 with the E4M3 index).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.json 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer > $L/ti.log 2>&1; t "test_cuda_indexer rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/ti.log | tr '\n' ' ') $(grep -E 'OK \] CudaIndexer.PrefillOneHead' $L/ti.log)"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/default.json > $L/default.log 2>&1; t "default rc=$? $(tail -1 $L/default.log)"
timeout 100 ./flashmsa run --device cuda --workload prefill --cases 8 --heads 16/1 --index-dtype fp8 --kv-dtype nvfp4 --check --json $OUT/p16.json > $L/p16.log 2>&1; t "prefill 16/1 rc=$? $(tail -1 $L/p16.log)"
