#!/bin/bash
# Session 33 run G: diagnosis builds of the final tree (wrong results by design): x1 no producer K widening,
# x2 no consumer V widening, x3 neither; against the default.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b64_s100000_q8,b128_s100000_q8
B="--suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats nvfp4"
for v in def x1 x2 x3; do
  bin=./bench_decode; [ $v != def ] && bin=./bench_decode_$v
  timeout 40 $bin $B --csv $OUT/nv_${v}.csv > $L/nv_${v}.log 2>&1; t "nv $v rc=$?"
done
