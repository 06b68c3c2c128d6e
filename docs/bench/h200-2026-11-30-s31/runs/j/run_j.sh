#!/bin/bash
# Session 31 run J: decode attention (issue 8) with Q K^T on QGMMA (FLASHMSA_FP8_QK=e4m3, outside D8)
# against the default 16-bit MMAs on exact images: the full decode suite, FP8 and NVFP4 KV, 64/4 and 16/1.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./bench_decode --suite full --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/exact.csv > $L/exact.log 2>&1; t "exact rc=$?"
FLASHMSA_FP8_QK=e4m3 timeout 200 ./bench_decode --suite full --heads 64/4,16/1 --formats fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/qgmma.csv > $L/qgmma.log 2>&1; t "qgmma rc=$?"
head -3 $L/exact.log
