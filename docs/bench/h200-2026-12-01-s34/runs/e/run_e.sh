#!/bin/bash
# Session 34 run E: folded split merge against the combine kernel (FLASHMSA_DECODE_MERGE=combine)
# at forced split counts 2-5, FP8, Q 8, tile counts 24-64 (64- and 128-row tiles).
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b8_s10000_q8,b8_s100000_q8,b32_s10000_q8,b32_s100000_q8,b64_s10000_q8
A="--suite full --cases $C --heads 24/3,8/1,40/5,48/6,64/8,48/3,16/1,80/5,128/8 --calls 40 --reps 10 --formats fp8"
for rep in 1 2; do
  for s in 2 3 4 5; do
    FLASHMSA_DECODE_SPLITS=$s timeout 90 ./bench_decode $A --csv $OUT/s${s}_$rep.csv > $L/s${s}_$rep.log 2>&1
    FLASHMSA_DECODE_MERGE=combine FLASHMSA_DECODE_SPLITS=$s timeout 90 ./bench_decode $A --csv $OUT/c${s}_$rep.csv > $L/c${s}_$rep.log 2>&1; t "s$s $rep rc=$?"
  done
done
