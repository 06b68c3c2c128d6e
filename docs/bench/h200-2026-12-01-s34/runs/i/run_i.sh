#!/bin/bash
# Session 34 run I: warp-MMA kernel, FP8 / NVFP4 take 6 splits where the rule gave 8.
# Decode tests, the CLI check, then the low-latency suite at Q 4 and Q 8 (3 head splits,
# every format) against 8582ce1 (bench_decode_old), interleaved, two passes.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do
  for q in 4 8; do
    A="--suite low_latency --q $q --heads 64/4,32/2,16/1 --calls 40 --reps 10 --formats fp8,nvfp4,bf16"
    timeout 60 ./bench_decode_old $A --csv $OUT/old_q${q}_$rep.csv > $L/old_q${q}_$rep.log 2>&1
    timeout 60 ./bench_decode $A --csv $OUT/new_q${q}_$rep.csv > $L/new_q${q}_$rep.log 2>&1; t "q$q $rep"
  done
done
