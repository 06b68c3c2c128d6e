#!/bin/bash
# Session 25 run G: tiles per work unit (FLASHMSA_PREFILL_TILES_PER_UNIT) 24 / 28 / 30 / 32 (default at the floor
# case) / 36 on the closing build, five cases, three interleaved passes; the prefill tests at 28 and 36.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do for u in def 24 28 30 36; do
  E=""; [ $u != def ] && E=FLASHMSA_PREFILL_TILES_PER_UNIT=$u
  env $E timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_tpu${u}_$pass.csv > $L/b_tpu${u}_$pass.log 2>&1
  echo "tpu $u $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_tpu${u}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
for u in 28 36; do
  FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 100 ./test_cuda_prefill > $L/test_pf_tpu$u.log 2>&1; t "test_cuda_prefill tpu $u rc=$? ok=$(grep -c 'OK \]' $L/test_pf_tpu$u.log) $(grep 'FAILED  \]' $L/test_pf_tpu$u.log | head -3 | tr '\n' ' ')"
done
