#!/bin/bash
# s30 run K: the 128 prefill benchmark cases through the CLI (64/4, all on the GPU, no check), BF16 index q /
# index-K, then E4M3 (--index-dtype fp8): the final tree (7976d6b code), to compare with s29 run N.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.json 2>/dev/null' EXIT
timeout 280 ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "bf16 index rc=$? $(tail -1 $L/prefill128.log)"
timeout 280 ./flashmsa run --device cuda --workload prefill --no-check --index-dtype fp8 --json $OUT/prefill128_fp8idx.json > $L/prefill128_fp8idx.log 2>&1; t "fp8 index rc=$? $(tail -1 $L/prefill128_fp8idx.log)"
grep -h "^weighted\|^unweighted" $L/*.log
