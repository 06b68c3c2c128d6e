#!/bin/bash
# s21 run A: NVFP4 per-warp decode scoring tile sweep (FLASHMSA_DEC_* overrides; the kernel is NVFP4-only
# since s20) + ncu warp-state / source counters of the base build at b64 x 100K.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
V="base mt1 w8s6 c2w6s4 u64s3 u128s2 u64s4w8"
for rep in 1 2; do for v in $V; do
  timeout 60 ./sw/bench_indexer_$v --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in $V; do echo "== $v"; grep -E "^dscore" $OUT/ix_${v}_2.csv | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000|b8_s1000_" | grep -v s5000_ | cut -d, -f2,8,11 | sed 's/_q8//' | paste -sd' '; done
timeout 200 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section WarpStateStats --section SchedulerStats --section SourceCounters --section InstructionStats ./sw/bench_indexer_base --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu_stall.log 2>&1; t "ncu rc=$?"
grep -iE "stall|warp cycles|issued|eligible|active warps|No Eligible" $L/ncu_stall.log | sed 's/  */ /g' | head -60
