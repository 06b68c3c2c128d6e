#!/bin/bash
# Session 31 run C (diagnosis, wrong results by design, patch diag.patch): the QGMMA NVFP4 decode scorer
# without the NVFP4 lookup (raw code bytes as A, -DFLASHMSA_DIAG_NOLOOKUP), without the page-end
# warpgroup barrier (-DFLASHMSA_DIAG_NOEPI), and without both.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2; do
  for v in "" _nolk _noepi _both; do
    timeout 100 ./bench_indexer$v --what decode --formats nvfp4 --suite full --reps 10 --fp8-qk e4m3 --csv $OUT/q8${v}_$rep.csv > $L/q8${v}_$rep.log 2>&1; t "q8$v $rep rc=$?"
  done
done
