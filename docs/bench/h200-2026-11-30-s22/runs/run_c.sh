#!/bin/bash
# Session 22 run C: the overlapped combine (default) against FLASHMSA_PREFILL_OVERLAP=0 (same binary), free-SM sweep.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
grep -E 'Failure|Expected|Which is|actual' $L/test_cuda_prefill.log | head -8
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
B="timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer"
for pass in 1 2; do
  FLASHMSA_PREFILL_OVERLAP=0 $B --csv $OUT/off_$pass.csv > $L/off_$pass.log 2>&1; t "off pass $pass rc=$?"
  cut -d, -f1-4,6,8,9,11-13 $OUT/off_$pass.csv | tail -n +2 | paste -sd' '
  for r in 16 24 32; do
    FLASHMSA_PREFILL_COMBINE_SMS=$r $B --csv $OUT/on${r}_$pass.csv > $L/on${r}_$pass.log 2>&1; t "on R=$r pass $pass rc=$?"
    cut -d, -f1-4,6,8,9,11-13 $OUT/on${r}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
