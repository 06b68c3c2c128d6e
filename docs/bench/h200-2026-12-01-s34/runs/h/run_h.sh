#!/bin/bash
# Session 34 run H: warp-MMA decode split counts (low-latency suite: b1 / b2 / b4 at 1K-32K)
# at Q 1, 2, 4, 8, heads 64/4, 32/2, 16/1, 8/1, FP8: the plan's rule against 2-16 forced.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b1_s4000_q8,b2_s4000_q8,b4_s4000_q8,b1_s32000_q8,b2_s32000_q8,b4_s32000_q8
for q in 1 2 4 8; do
  A="--suite low_latency --cases $C --q $q --heads 64/4,32/2,16/1,8/1 --calls 40 --reps 10 --formats fp8"
  timeout 60 ./bench_decode $A --csv $OUT/q${q}_def.csv > $L/q${q}_def.log 2>&1
  for s in 2 3 4 5 6 8 16; do
    FLASHMSA_DECODE_SPLITS=$s timeout 60 ./bench_decode $A --csv $OUT/q${q}_s$s.csv > $L/q${q}_s$s.log 2>&1
  done
  t "q $q"
done
