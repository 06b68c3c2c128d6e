#!/bin/bash
# Session 22 run D: where the overlap's attention time goes: modes 0 (off), 1 (on, R=24), 2 (order + signals, combine after),
# 3 (order only), and the run-A build (TMA store, no overlap code), interleaved.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,64/4:8192:32768
for pass in 1 2; do
  timeout 60 ./bench_prefill_runA --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/runA_$pass.csv > $L/runA_$pass.log 2>&1; t "runA pass $pass rc=$?"
  cut -d, -f1-4,6,8,9,11-13 $OUT/runA_$pass.csv | tail -n +2 | paste -sd' '
  for m in 0 1 2 3; do
    FLASHMSA_PREFILL_COMBINE_SMS=24 FLASHMSA_PREFILL_OVERLAP=$m timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/m${m}_$pass.csv > $L/m${m}_$pass.log 2>&1; t "mode $m pass $pass rc=$?"
    cut -d, -f1-4,6,8,9,11-13 $OUT/m${m}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
