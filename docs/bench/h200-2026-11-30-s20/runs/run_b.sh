#!/bin/bash
# s20 run B: ncu of the first wg decode scoring kernel (NVFP4, b64 x 100K): SASS counters + stalls, SOL.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
export FLASHMSA_DEC_SCORE=wg
ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/sass_wg.csv 2>&1
ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section ComputeWorkloadAnalysis --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu.log 2>&1
