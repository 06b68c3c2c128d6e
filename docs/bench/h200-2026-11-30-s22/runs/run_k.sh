#!/bin/bash
# Session 22 run K: tiles per unit 16 / 20 / 24 / 32 with the dispatch order of run I, and test_cuda_prefill at 20, 24, 32.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for u in 16 20 24 32; do
    FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/tpu${u}_$pass.csv > $L/tpu${u}_$pass.log 2>&1; t "tpu $u pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/tpu${u}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
for u in 20 24 32; do
  FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 60 ./test_cuda_prefill > $L/test_tpu$u.log 2>&1; t "test_cuda_prefill tpu $u rc=$? ok=$(grep -c 'OK \]' $L/test_tpu$u.log)"
done
