#!/bin/bash
# s20 run C: wg (shared-space loads, uniform descriptors, reduce-scatter page max) and wgpipe (two
# m64 tiles in flight, 3 groups) against warp; decode tests under wg and wgpipe.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for v in wg wgpipe; do
FLASHMSA_DEC_SCORE=$v timeout 200 ./test_cuda_indexer --gtest_filter='*Decode*:*Ties*:*NaN*' > $L/test_$v.log 2>&1; t "test $v rc=$? ok=$(grep -c 'OK \]' $L/test_$v.log)"
done
for rep in 1 2; do for v in warp wg wgpipe; do
  FLASHMSA_DEC_SCORE=$v timeout 100 ./bench_indexer --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
