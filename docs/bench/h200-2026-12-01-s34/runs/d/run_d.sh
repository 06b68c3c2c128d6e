#!/bin/bash
# Session 34 run D: decode split-count sweep over more tile counts (FP8, Q 8): heads with
# G 16 (48/3 80/5 96/6 112/7 128/8 16/1) and G 8 (24/3 40/5 48/6 64/8 8/1), batch 8-64.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b8_s10000_q8,b8_s100000_q8,b32_s10000_q8,b32_s100000_q8,b64_s10000_q8
A="--suite full --cases $C --heads 48/3,80/5,96/6,112/7,128/8,16/1,24/3,40/5,48/6,64/8,8/1 --calls 40 --reps 10 --formats fp8"
for rep in 1 2; do
  timeout 90 ./bench_decode $A --csv $OUT/def_$rep.csv > $L/def_$rep.log 2>&1; t "def $rep rc=$?"
  for s in 1 2 3 4 5 6 8; do
    FLASHMSA_DECODE_SPLITS=$s timeout 90 ./bench_decode $A --csv $OUT/s${s}_$rep.csv > $L/s${s}_$rep.log 2>&1; t "s$s $rep rc=$?"
  done
done
