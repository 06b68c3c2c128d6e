#!/bin/bash
# Session 31 run G: the prefill indexer at (2048, 1M) and (128, 32K), 1 and 4 index heads, on each E4M3
# scoring path (exact = BF16 HGMMA on exact images, e4m3 = QGMMA, e4m3_split = QGMMA with per-k32 FP32
# promotion), two interleaved passes; what the QGMMA decision (D7/D8) would give issue 5's prefill floor.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2; do
  for m in exact e4m3 e4m3_split; do
    timeout 120 ./bench_indexer --what prefill --reps 10 --fp8-qk $m --csv $OUT/pf_${m}_$rep.csv > $L/pf_${m}_$rep.log 2>&1; t "$m $rep rc=$?"
  done
done
grep "e4m3/" $L/pf_*_2.log | cut -c1-140
