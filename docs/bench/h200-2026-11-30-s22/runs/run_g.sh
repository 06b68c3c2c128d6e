#!/bin/bash
# Session 22 run G: ncu of the attention kernel at HEAD (TMA-store epilogue, 12 tiles per unit), (16/1, 8192, 32768),
# BF16 and Q8KV4: speed of light, warp states, scheduler, instruction mix, top stall locations.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters"
for k in ILi0ELb0 ILi2ELb1; do
  timeout 200 ncu $S --kernel-name-base mangled --kernel-name regex:"prefill_attention$k" --launch-count 1 ./bench_prefill --cases 16/1:8192:32768 --reps 1 --selection random --kernels kv_outer > $L/ncu_$k.log 2>&1; t "ncu $k rc=$?"
  grep -E "Duration|Issue Slots Busy|Executed Ipc A|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Stall|Executed Instructions  |Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Tensor|pipe" $L/ncu_$k.log | head -40
done
