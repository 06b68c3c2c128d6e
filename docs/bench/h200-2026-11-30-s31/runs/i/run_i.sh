#!/bin/bash
# Session 31 run I: QGMMA wide prefill scorer, B stages 4 (default) / 6 / 8 (-DFLASHMSA_INDEXER_Q8_WIDE_STAGES),
# prefetch distance stages - 2; three interleaved passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2 3; do
  for v in "" _s6 _s8; do
    timeout 120 ./bench_indexer$v --what prefill --reps 10 --fp8-qk e4m3 --csv $OUT/pf_e4m3${v}_$rep.csv > $L/pf_e4m3${v}_$rep.log 2>&1; t "e4m3$v $rep rc=$?"
  done
done
grep "e4m3/" $L/pf_*_3.log | grep q2048 | cut -c1-150
