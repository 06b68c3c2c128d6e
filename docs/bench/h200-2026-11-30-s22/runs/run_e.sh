#!/bin/bash
# Session 22 run E: tiles per work unit (FLASHMSA_PREFILL_TILES_PER_UNIT) per format at HEAD (TMA-store epilogue).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for pass in 1 2; do
  for u in 8 6 12 16; do
    FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/tpu${u}_$pass.csv > $L/tpu${u}_$pass.log 2>&1; t "tpu $u pass $pass rc=$?"
    cut -d, -f1-4,6,8,11-13 $OUT/tpu${u}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
