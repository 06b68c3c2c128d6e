#!/bin/bash
# s20 run A: warpgroup (wgmma, register-A) decode scoring kernel: indexer tests (default = wg),
# memcheck/racecheck on the decode E4M3 cases, bench wg vs warp interleaved (FLASHMSA_DEC_SCORE, an
# environment switch that existed only during this session).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log)"
timeout 150 compute-sanitizer --tool memcheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/memcheck.log 2>&1; t "memcheck rc=$?"
timeout 150 compute-sanitizer --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/racecheck.log 2>&1; t "racecheck rc=$?"
for rep in 1 2; do for v in warp wg; do
  FLASHMSA_DEC_SCORE=$v timeout 100 ./bench_indexer --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
