#!/bin/bash
# Session 23 run M: SASS of the attention kernels (cuobjdump), ncu opcode mix, stall reasons and pipe utilisation at (16/1, 8192, 32768).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
which cuobjdump nvdisasm
cuobjdump -sass pf_base.o > $L/sass.txt 2>&1; t "cuobjdump rc=$? $(wc -l < $L/sass.txt)"
M='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$,regex:^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$,sass__inst_executed_per_opcode,smsp__inst_executed.sum,sm__cycles_elapsed.avg'
for k in ILi0ELb0 ILi2ELb1; do
  timeout 200 ncu --metrics "$M" --print-metric-instances values --kernel-name-base mangled --kernel-name regex:"prefill_attention$k" --launch-count 1 ./bench_prefill --cases 16/1:8192:32768 --reps 1 --selection random --kernels kv_outer > $L/ncu_$k.log 2>&1; t "ncu $k rc=$?"
done
