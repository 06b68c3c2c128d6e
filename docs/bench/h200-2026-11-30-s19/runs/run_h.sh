#!/bin/bash
# s19 run H: NVFP4 decode scoring with 16 warps x MT 1 (128 registers, 128-byte spill in
# the issue path) against HEAD's 12 warps x MT 2 (168 registers), interleaved twice.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer_w16 --gtest_filter='*Decode*' > $L/test_w16.log 2>&1; t "test_cuda_indexer_w16 decode rc=$? ok=$(grep -c 'OK \]' $L/test_w16.log) $(grep 'FAILED  \]' $L/test_w16.log | head -3 | tr '\n' ' ')"
for rep in 1 2; do for v in head w16; do
  timeout 100 ./bench_indexer_$v --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
for v in head w16; do grep dscore $OUT/ix_${v}_2.csv | grep -E "_s1000_|s5000_|b32_s5|b64_s5|b128_s5|s100000|s200000" | cut -d, -f2,8,11 | tr '\n' ' '; echo; done
