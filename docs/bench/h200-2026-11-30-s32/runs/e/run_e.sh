#!/bin/bash
# Session 32 run E: ncu stall reasons of the warp-specialised tile kernel (FP8, b128 x 10K, 64/4), source-level.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
M=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle membar sleeping branch_resolving dispatch_stall drain no_instruction not_selected selected tex_throttle misc; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
M="${M:1},sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg"
for k in tile tile_serial; do
FLASHMSA_DECODE_KERNEL=$k timeout 120 ncu -k regex:sparse_attention -s 3 -c 1 --metrics $M ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats fp8 --calls 2 --reps 1 > $L/ncu_stall_$k.txt 2>&1; t "ncu $k rc=$?"
done
FLASHMSA_DECODE_KERNEL=tile timeout 200 ncu -k regex:sparse_attention -s 3 -c 1 --section SourceCounters --section WarpStateStats --import-source no -o $OUT/ws_src ./bench_decode --suite full --cases b128_s10000_q8 --heads 64/4 --formats fp8 --calls 2 --reps 1 > $L/ncu_src.txt 2>&1; t "ncu src rc=$?"
ncu -i $OUT/ws_src.ncu-rep --page source --csv --print-source sass > $L/ws_sass.csv 2>&1; t "export rc=$? $(wc -l < $L/ws_sass.csv)"
rm -f $OUT/ws_src.ncu-rep
