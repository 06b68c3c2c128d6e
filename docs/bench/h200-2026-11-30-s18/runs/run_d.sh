#!/bin/bash
# s18 run D: where the decode scoring loop's right shifts run, same GPU, interleaved twice. Builds of
# FLASHMSA_DEC_FMA_SHIFTS (a temporary macro, removed again): 0 = all on the ALU pipe (kept),
# 1 = the high halves fed to the E4M3 -> F16 conversions as mul.hi, 3 = also the NVFP4 lookups' shifts.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2; do for v in 0 1 3; do
timeout 100 ./bench_indexer_v$v --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/dec_v${v}_$rep.csv > $L/dec_v${v}_$rep.log 2>&1; t "v$v rep $rep rc=$?"
done; done
for v in 0 1 3; do echo "== v$v"; grep dscore $OUT/dec_v${v}_1.csv | grep -E "b32_s5000|b64_s50000|s100000|b64_s200000" | cut -d, -f2,3,8,11 | paste -sd' '; grep dscore $OUT/dec_v${v}_2.csv | grep -E "b32_s5000|b64_s50000|s100000|b64_s200000" | cut -d, -f2,3,8,11 | paste -sd' '; done
timeout 100 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section ComputeWorkloadAnalysis --section WarpStateStats --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active ./bench_indexer_v0 --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu_v0.log 2>&1; t "ncu v0 rc=$?"; grep -E "pipe|Duration|Issue Slots|Warp Cycles" $L/ncu_v0.log | head -12
