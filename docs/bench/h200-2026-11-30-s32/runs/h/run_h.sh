#!/bin/bash
# Session 32 run H: ncu source-level stall samples of the warp-specialised tile kernel after the prologue changes (FP8, b128 x 10K, 64/4).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
M="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg,gpu__time_duration.sum"
FLASHMSA_DECODE_KERNEL=tile timeout 100 ncu -k regex:sparse_attention -s 3 -c 1 --metrics $M ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats fp8 --calls 2 --reps 1 > $L/ncu_m.txt 2>&1; t "ncu m rc=$?"
FLASHMSA_DECODE_KERNEL=tile timeout 200 ncu -k regex:sparse_attention -s 3 -c 1 --section SourceCounters --section WarpStateStats --import-source no -o $OUT/ws_src ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats fp8 --calls 2 --reps 1 > $L/ncu_src.txt 2>&1; t "ncu src rc=$?"
ncu -i $OUT/ws_src.ncu-rep --page source --csv --print-source sass > $L/ws_sass.csv 2>&1; t "export rc=$? $(wc -l < $L/ws_sass.csv)"
rm -f $OUT/ws_src.ncu-rep
