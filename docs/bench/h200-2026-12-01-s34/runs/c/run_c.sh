#!/bin/bash
# Session 34 run C: decode split-count sweep (FLASHMSA_DECODE_SPLITS=1..8 and the heuristic),
# FP8, Q 4 / 8 / 16, heads 64/4, 16/1, 8/1, batch 8-128 at 10K and 100K.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b8_s10000_q8,b8_s100000_q8,b32_s10000_q8,b32_s100000_q8,b64_s10000_q8,b64_s100000_q8,b128_s10000_q8
for rep in 1 2; do
  for q in 4 8 16; do
    A="--suite full --cases $C --q $q --heads 64/4,16/1,8/1 --calls 40 --reps 10 --formats fp8"
    timeout 60 ./bench_decode $A --csv $OUT/q${q}_def_$rep.csv > $L/q${q}_def_$rep.log 2>&1
    for s in 1 2 3 4 5 6 7 8; do
      FLASHMSA_DECODE_SPLITS=$s timeout 60 ./bench_decode $A --csv $OUT/q${q}_s${s}_$rep.csv > $L/q${q}_s${s}_$rep.log 2>&1
    done
    t "q $q rep $rep"
  done
done
