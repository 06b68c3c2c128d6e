#!/bin/bash
# Session 23 run N: ncu source-level (SASS) stall sampling of the BF16 attention kernel at (16/1, 8192, 32768).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
ncu --version | tail -1
ncu --help | grep -iE "print-source|page|print-details" > $L/ncu_help.txt
timeout 200 ncu -o $L/rep --section SourceCounters --section WarpStateStats --section InstructionStats --kernel-name-base mangled --kernel-name regex:"prefill_attentionILi0ELb0" --launch-count 1 ./bench_prefill --cases 16/1:8192:32768 --reps 1 --selection random --kernels kv_outer > $L/ncu_run.log 2>&1; t "ncu rc=$?"
ncu -i $L/rep.ncu-rep --page source --print-source sass --csv > $L/source_sass.csv 2> $L/source_err.txt; t "source rc=$? $(wc -l < $L/source_sass.csv)"
ncu -i $L/rep.ncu-rep --page details --print-details all > $L/details.txt 2>&1; t "details rc=$?"
