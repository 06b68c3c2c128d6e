#!/bin/bash
# s19 run A: NVFP4 lookup with the sign as an IMAD (prmt of 0x01010101 by the raw nibbles) and
# a bit-7-flipped table; exhaustive lookup test; NVFP4 kernels' tests; old/new decode scoring
# interleaved; ncu opcode summary of the new NVFP4 decode scoring kernel.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_gmma test_cuda_indexer test_cuda_decode test_cuda_nvfp4_selected test_cuda_prefill; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
for rep in 1 2; do for v in old new; do
  s=""; [ $v = old ] && s=_old
  timeout 100 ./bench_indexer$s --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
for v in old new; do grep dscore $OUT/ix_${v}_2.csv | grep nvfp4 | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000" | cut -d, -f2,8,11 | tr '\n' ' '; echo; done
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis --page source --print-source sass --csv ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/sass_nvfp4.csv 2>&1; t "ncu sass rc=$?"
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section ComputeWorkloadAnalysis --section WarpStateStats --section SpeedOfLight ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu.log 2>&1; t "ncu rc=$?"; grep -E "Duration|Issue Slots|ALU is|highest|Warp Cycles Per Issued" $L/ncu.log | head
