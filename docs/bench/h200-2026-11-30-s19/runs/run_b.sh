#!/bin/bash
# s19 run B: decode scoring without the 8-byte spill (32-bit row/position copies); A and B
# interleaved; ncu of the top-k kernels (decode call's topk_kernel, b32_s50000 and the topk suite).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log) $(grep 'FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
for rep in 1 2; do for v in a b; do
  s=""; [ $v = a ] && s=_a
  timeout 100 ./bench_indexer$s --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
for v in a b; do grep dscore $OUT/ix_${v}_2.csv | grep nvfp4 | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000" | cut -d, -f2,8,11 | tr '\n' ' '; echo; done
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:topk --launch-skip 3 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats ./bench_indexer --what decode --formats fp8 --case b32_s50000 --reps 1 --calls 2 > $L/ncu_topk.log 2>&1; t "ncu topk rc=$?"
grep -E "topk|Duration|Registers|Achieved Occ|Theoretical Occ|Warp Cycles Per Issued|Block Size|Grid Size|Issue Slots" $L/ncu_topk.log | head -20
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:topk --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv ./bench_indexer --what decode --formats fp8 --case b32_s50000 --reps 1 --calls 2 > $L/sass_topk.csv 2>&1; t "ncu topk sass rc=$?"
