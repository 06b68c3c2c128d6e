#!/bin/bash
# s20 run D: E4M3 on the wg kernel (Q prefetched), NVFP4 on the warp kernel: indexer tests,
# memcheck/racecheck, CLI check; bench head (s19 build) vs new (3 groups x 3 stages) vs g4 (4 groups x
# 2 stages, FLASHMSA_DECWG_E4M3_GROUPS=4); low-latency suite head vs new.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log)"
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeE4m3Shapes:CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/memcheck.log 2>&1; t "memcheck rc=$?"
timeout 150 compute-sanitizer --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/racecheck.log 2>&1; t "racecheck rc=$?"
timeout 200 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run cuda rc=$?"
for rep in 1 2; do for v in head new g4; do
  b=./bench_indexer; [ $v = head ] && b=./bench_indexer_head; [ $v = g4 ] && b=./bench_indexer_g4
  timeout 100 $b --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
timeout 100 ./bench_indexer --what decode --suite low_latency --formats fp8,nvfp4 --reps 10 --csv $OUT/ixll_new.csv > $L/ixll_new.log 2>&1
timeout 100 ./bench_indexer_head --what decode --suite low_latency --formats fp8,nvfp4 --reps 10 --csv $OUT/ixll_head.csv > $L/ixll_head.log 2>&1
