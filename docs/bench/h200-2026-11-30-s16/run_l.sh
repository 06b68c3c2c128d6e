#!/bin/bash
# Session 16, H200 run L: the CLI end-to-end check on the final build (indexer change of run K).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; T0=$SECONDS
timeout 150 ./flashmsa run --device cuda --check > $OUT/run_cuda.log 2>&1; echo "[$((SECONDS-T0))s] flashmsa run --device cuda --check rc=$? $(tail -1 $OUT/run_cuda.log)"
