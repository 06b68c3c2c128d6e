#!/bin/bash
# Session 34 run B: decode split-count sweep on HEAD (FLASHMSA_DECODE_SPLITS=1..6 against the
# heuristic), and the folded merge against the combine kernel (FLASHMSA_DECODE_MERGE=combine).
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
A="--suite all --heads 64/4,16/1 --calls 40 --reps 10 --formats fp8,bf16,nvfp4"
for rep in 1 2; do
  timeout 100 ./bench_decode $A --csv $OUT/def_$rep.csv > $L/def_$rep.log 2>&1; t "def $rep rc=$?"
  for s in 1 2 3 4 6; do
    FLASHMSA_DECODE_SPLITS=$s timeout 100 ./bench_decode $A --csv $OUT/s${s}_$rep.csv > $L/s${s}_$rep.log 2>&1; t "splits $s $rep rc=$?"
  done
  FLASHMSA_DECODE_MERGE=combine timeout 100 ./bench_decode $A --csv $OUT/comb_$rep.csv > $L/comb_$rep.log 2>&1; t "combine $rep rc=$?"
done
