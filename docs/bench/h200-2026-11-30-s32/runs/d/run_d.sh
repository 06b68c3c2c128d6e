#!/bin/bash
# Session 32 run D: ncu of the warp-specialised and the serial tile kernels, b128 x 10K, FP8 and BF16, 64/4.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters"
for f in fp8 bf16; do
 for k in tile tile_serial; do
  FLASHMSA_DECODE_KERNEL=$k timeout 120 ncu -k regex:sparse_attention -s 3 -c 1 $S ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats $f --calls 2 --reps 1 > $L/ncu_${f}_$k.txt 2>&1; t "ncu $f $k rc=$?"
 done
done
