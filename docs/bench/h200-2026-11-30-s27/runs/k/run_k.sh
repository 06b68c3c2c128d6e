#!/bin/bash
# s27 run K: smoke run after the final mend (one input-filling helper, fill_attention_inputs, for both
# benchmarks; one graph-capture helper in bench_prefill): floor case on random and constant inputs, one
# decode case on random inputs.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 60 ./bench_prefill --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_random.csv > $L/pf_random.log 2>&1; echo "rc=$?"
timeout 60 ./bench_prefill --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer --data constant --flush 0 --csv $OUT/pf_constant.csv > $L/pf_constant.log 2>&1; echo "rc=$?"
timeout 100 ./bench_decode --suite full --cases b32_s50000_q8 --heads 64/4 --formats fp8,nvfp4 --csv $OUT/dec.csv > $L/dec.log 2>&1; echo "rc=$?"
cat $L/pf_random.log $L/pf_constant.log; cat $OUT/dec.csv
