#!/bin/bash
# s20 run I: NVFP4 per-warp decode scoring, Q fragments in a per-warp shared tile, 12 warps x 4 stages, the
# next unit's words read and dequantised during this unit's MMAs (FLASHMSA_DEC_QSMEM=2, "qp") against HEAD.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer_qp --gtest_filter='*Decode*:*Ties*:*NaN*' > $L/test_qp.log 2>&1; t "test qp rc=$? ok=$(grep -c 'OK \]' $L/test_qp.log) $(grep 'FAILED  \]' $L/test_qp.log | head -3 | tr '\n' ' ')"
for rep in 1 2; do for v in head qp; do b=./bench_indexer; [ $v = qp ] && b=./bench_indexer_qp
  timeout 100 $b --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head qp; do echo "== $v"; grep -E "^(dscore|decode)" $OUT/ix_${v}_2.csv | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000|s10000" | grep -v s5000_ | cut -d, -f1,2,8,11 | sed 's/_q8//' | paste -sd' '; done
