#!/bin/bash
# s19 run G2 (the benchmark with its regs/bulk output check): bench_combine_sm, one combine CTA's bandwidth per SM (issue 4's combine-overlap
# plan): register loads (16 x 16 B per thread) and a 3-stage bulk-copy ring, 132..8 CTAs.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./bench_combine_sm --ctas 132,66,33,16,8,1 --csv $OUT/combine_sm.csv > $L/combine_sm.log 2>&1; t "bench_combine_sm rc=$?"
cat $L/combine_sm.log
timeout 60 compute-sanitizer --print-limit 5 ./bench_combine_sm --rows 4096 --ctas 8 > $L/san.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san.log)"
