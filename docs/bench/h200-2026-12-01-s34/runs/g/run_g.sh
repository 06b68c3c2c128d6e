#!/bin/bash
# Session 34 run G: the new split rule at Q 4 and Q 16 (full suite, FP8 and NVFP4, 64/4 and
# 16/1), HEAD 95f6fd6 against 8582ce1 (bench_decode_old), interleaved, two passes.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2; do
  for q in 4 16; do
    A="--suite full --q $q --heads 64/4,16/1 --calls 40 --reps 10 --formats fp8,nvfp4"
    timeout 100 ./bench_decode_old $A --csv $OUT/old_q${q}_$rep.csv > $L/old_q${q}_$rep.log 2>&1; t "old q$q $rep rc=$?"
    timeout 100 ./bench_decode $A --csv $OUT/new_q${q}_$rep.csv > $L/new_q${q}_$rep.log 2>&1; t "new q$q $rep rc=$?"
  done
done
