#!/bin/bash
# s21 run B: per-kernel GPU time of the prefill call (plan kernels, attention, combine) at (16/1, 8192, 32768)
# and (16/1, 8192, 0), random selection, each format, by ncu (kernels serialised: no PDL overlap).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for c in 16/1:8192:32768 16/1:8192:0; do n=$(echo $c | tr '/:' '__')
timeout 240 ncu --metrics gpu__time_duration.sum --launch-count 80 ./bench_prefill --cases $c --reps 1 --selection random --kernels kv_outer > $L/ncu_$n.log 2>&1; t "ncu $c rc=$?"
python3 ncu_sum.py $L/ncu_$n.log
done
