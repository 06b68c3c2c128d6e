#!/bin/bash
# s30 run C: timeline build (plan_zero no longer waits on the record; plan_place's inner stamps) at two shapes,
# with plan_place and with FLASHMSA_PLAN_PLACE=0.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for c in 16/1:8192:32768 16/1:16384:114688; do
  for env in 1 0; do
    n=$(echo $c | tr '/:' '__')_$env
    FLASHMSA_PLAN_PLACE=$env timeout 120 ./bench_prefill_tl --cases $c --reps 20 --selection random --kernels kv_outer --csv $OUT/tl_$n.csv > $L/tl_$n.log 2>&1
    t "timeline $c place=$env rc=$?"
    grep -E "^timeline (10) " $L/tl_$n.log
  done
done
