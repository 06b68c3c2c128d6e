#!/bin/bash
# Session 34 run K: the warp-MMA 8 -> 6 split rule moved into the plan (only where the
# 8-CTA clusters do not all fit). Decode tests, the CLI check, and the low-latency suite
# at Q 3, 4 and 8 (64/4, 32/2, 16/1; FP8, NVFP4) against 8582ce1 (bench_decode_old).
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 40 ./test_cuda_decode --gtest_filter='CudaDecode.WarpMmaSplits*:CudaDecode.WarpMmaClusterCapacity' > $L/guard.log 2>&1; t "guard rc=$? $(grep 'PASSED\|FAILED  \]' $L/guard.log | head -3 | tr '\n' ' ')"
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'PASSED\|FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for q in 3 4 8; do
  A="--suite low_latency --cases b1_s4000_q8,b2_s4000_q8,b4_s4000_q8 --q $q --heads 64/4,32/2,16/1 --calls 40 --reps 10 --formats fp8,nvfp4"
  timeout 60 ./bench_decode_old $A --csv $OUT/old_q$q.csv > $L/old_q$q.log 2>&1
  timeout 60 ./bench_decode $A --csv $OUT/new_q$q.csv > $L/new_q$q.log 2>&1; t "q$q"
done
