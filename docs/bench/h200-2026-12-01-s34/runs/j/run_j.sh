#!/bin/bash
# Session 34 run J: warp-MMA, 6 against 8 splits at 10-14 row CTAs (where 8-CTA clusters
# fit: 15 on the H200), FP8 and NVFP4, Q 3 / 5 / 7, heads 64/4, 32/2, 16/1, b1 / b2 / b4 at 4K.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b1_s4000_q8,b2_s4000_q8,b4_s4000_q8
for rep in 1 2; do
  for q in 3 5 7; do
    A="--suite low_latency --cases $C --q $q --heads 64/4,32/2,16/1 --calls 40 --reps 10 --formats fp8,nvfp4"
    for s in 6 8; do
      FLASHMSA_DECODE_SPLITS=$s timeout 60 ./bench_decode $A --csv $OUT/q${q}_s${s}_$rep.csv > $L/q${q}_s${s}_$rep.log 2>&1
    done
    t "q$q $rep"
  done
done
