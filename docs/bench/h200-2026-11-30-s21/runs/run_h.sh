#!/bin/bash
# s21 run H: combine CTA size: 8 (HEAD), 16 and 32 (query, head) rows per CTA (FLASHMSA_COMBINE_ROWS),
# so a CTA reads 2 / 4 / 8 KB contiguous per slot plane at 16/1; bench_prefill interleaved x3.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768
for rep in 1 2 3; do for v in head c16 c32; do b=./bench_prefill; [ $v != head ] && b=./bench_prefill_$v
  timeout 150 $b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head c16 c32; do echo "== $v (us, combine)"; for rep in 1 2 3; do cut -d, -f1-4,6,8,13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//;s/^16,1,//;s/^64,4,/64:/' | paste -sd' '; done; done
