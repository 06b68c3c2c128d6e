#!/bin/bash
# s18 run E: decode scoring tile variants, same GPU, interleaved twice. Builds of the benchmark
# macros: base = FLASHMSA_DEC_WARPS 12, STAGES 4, UNIT_TOKENS 32, MT 2 (kept); w8u64mt4 = 8 warps,
# 3 stages, 64-token units, MT 4; w8 = 8 warps; u64s2 = 64-token units, 2 stages.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
V="base w8u64mt4 w8 u64s2"
for rep in 1 2; do for v in $V; do
timeout 100 ./bench_indexer_$v --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/dec_${v}_$rep.csv > $L/dec_${v}_$rep.log 2>&1; t "$v rep $rep rc=$?"
done; done
for v in $V; do for rep in 1 2; do echo "$v/$rep $(grep dscore $OUT/dec_${v}_$rep.csv | grep -E "b32_s5000_|b64_s50000|s100000|b64_s200000" | cut -d, -f2,3,11 | sed 's/_q8,/ /;s/\/exact//' | paste -sd' ')"; done; done
