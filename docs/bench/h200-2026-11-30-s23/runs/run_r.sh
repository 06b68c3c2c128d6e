#!/bin/bash
# Session 23 run R: v7 = v5 + query-major partials ([T, K, Hq, 128]: the combine reads one contiguous block per query);
# v7r8 = v7 with 8 combine rows per CTA. Tests of v7 (also 1 and 2 tiles per unit), bench base/v5/v7/v7r8 interleaved.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_prefill_v7 > $L/test_v7.log 2>&1; t "test v7 rc=$? ok=$(grep -c 'OK \]' $L/test_v7.log) $(grep 'FAILED  \]' $L/test_v7.log | head -3 | tr '\n' ' ')"
for u in 1 2; do FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 150 ./test_cuda_prefill_v7 > $L/test_v7_tpu$u.log 2>&1; t "v7 tpu$u rc=$? ok=$(grep -c 'OK \]' $L/test_v7_tpu$u.log)"; done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do
  for b in bench_prefill bench_prefill_v5 bench_prefill_v7 bench_prefill_v7r8; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
grep -h "16/1 q_len   8192 prefix   32768" $L/bench_prefill*_3.log
