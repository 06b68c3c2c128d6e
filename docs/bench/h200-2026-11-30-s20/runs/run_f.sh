#!/bin/bash
# s20 run F: the wg kernel's page-end barrier as bar.arrive (warps 1-3) + bar.sync (warp 0 stores), not
# kept. Tests, memcheck / racecheck / synccheck for the default build and for nvwg (NVFP4 also on the
# wg kernel, FLASHMSA_DEC_NVFP4_WG=1); bench head (4b270ad) vs new vs nvwg.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_indexer_nvwg; do
timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log)"
timeout 200 compute-sanitizer --tool memcheck ./$x --gtest_filter='CudaIndexer.DecodeE4m3Shapes:CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/memcheck_$x.log 2>&1
timeout 200 compute-sanitizer --tool racecheck ./$x --gtest_filter='CudaIndexer.DecodeE4m3Shapes' > $L/racecheck_$x.log 2>&1
timeout 200 compute-sanitizer --tool synccheck ./$x --gtest_filter='CudaIndexer.DecodeE4m3Shapes' > $L/synccheck_$x.log 2>&1
done
for rep in 1 2; do for v in head new nvwg; do
  b=./bench_indexer; [ $v = head ] && b=./bench_indexer_head; [ $v = nvwg ] && b=./bench_indexer_nvwg
  timeout 100 $b --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1
done; done
