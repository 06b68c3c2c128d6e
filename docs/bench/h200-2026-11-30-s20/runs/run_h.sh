#!/bin/bash
# s20 run H: ncu of the NVFP4 per-warp decode scoring kernel (HEAD) at b64 x 100K: shared-memory
# wavefronts and bank conflicts, issue stalls, dispatch; and the E4M3 wg kernel for comparison.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
M=l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__t_sectors.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fmaheavy.sum,smsp__inst_executed_pipe_tensor.sum
for f in nvfp4 fp8; do
timeout 150 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --metrics $M ./bench_indexer --what decode --formats $f --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu_$f.log 2>&1; echo "[$((SECONDS-T0))s] ncu $f rc=$?"
grep -E "l1tex|smsp|sm__|lts|dram" $L/ncu_$f.log | sed 's/  */ /g'
done
