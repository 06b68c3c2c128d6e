#!/bin/bash
# Session 23 run S (diagnostic ablations, results are wrong by design; timing only): HEAD against ng (Q gather TMA not
# issued: stale Q tiles), ns (no partial / (m c, l) stores), ngs (both). Bounds what a producer warp or cheaper
# partials could gain.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,64/4:8192:32768
for pass in 1 2; do
  for b in bench_prefill bench_prefill_ng bench_prefill_ns bench_prefill_ngs; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8,11,12,13 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
