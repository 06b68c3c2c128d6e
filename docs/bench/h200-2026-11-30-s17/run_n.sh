#!/bin/bash
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
trap "cd $OUT && tar czf all.tgz logs *.csv 2>/dev/null" EXIT
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log)"
for pre in 1 0; do
  FLASHMSA_INDEXER_PRECONVERT=$pre timeout 120 ./bench_indexer --what prefill --reps 10 --csv $OUT/n_pre$pre.csv > $L/bench_pre$pre.log 2>&1; t "bench_indexer PRECONVERT=$pre rc=$?"
  cut -d, -f1-9 $OUT/n_pre$pre.csv | grep e4m3
done
FLASHMSA_INDEXER_PRECONVERT=1 timeout 120 ncu --kernel-name preconvert_kernel --launch-count 2 --section SpeedOfLight ./bench_indexer --what prefill --reps 1 > $L/ncu.log 2>&1; t "ncu rc=$?"; grep -E "Duration|Memory Throughput|DRAM Through" $L/ncu.log | head -8
