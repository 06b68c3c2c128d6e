#!/bin/bash
# s29 run M: flashmsa run --warmup (untimed calls of each GPU stage before the timed one) on the H200.
# 32 real prefill cases at 16/1 (E4M3 index-K, Q8KV8) with --warmup 0 and 1, twice each; the default
# selection and 8 decode cases (NVFP4) with the default warm-up; all with --check.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.json 2>/dev/null' EXIT
R="run --device cuda --workload prefill --cases 32 --heads 16/1 --index-dtype fp8 --kv-dtype fp8 --check"
for pass in 1 2; do
  for w in 0 1; do
    timeout 250 ./flashmsa $R --warmup $w --json $OUT/wl_w${w}_$pass.json > $L/wl_w${w}_$pass.log 2>&1; t "prefill 16/1 warmup $w rc=$? $(tail -1 $L/wl_w${w}_$pass.log)"
  done
done
timeout 250 ./flashmsa run --device cuda --check --json $OUT/default.json > $L/default.log 2>&1; t "default selection rc=$? $(tail -1 $L/default.log)"
timeout 250 ./flashmsa run --device cuda --workload decode --cases 8 --kv-dtype nvfp4 --check --json $OUT/decode.json > $L/decode.log 2>&1; t "decode nvfp4 rc=$? $(tail -1 $L/decode.log)"
grep -h "^weighted" $L/wl_*.log
