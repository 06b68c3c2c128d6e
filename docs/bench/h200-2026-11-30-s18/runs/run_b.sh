#!/bin/bash
# s18 run B: decode scoring with the NVFP4 shared table, constant-trip copies, lane-spread stores.
# Run C is the same script on the build with nvfp4x8_lookup whose shifts ran on the FMA pipe (mul.hi).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer > $L/ix.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/ix.log) $(grep 'FAILED  \]' $L/ix.log | head -3 | tr '\n' ' ')"
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*' > $L/san.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san.log)"
timeout 120 ./bench_indexer --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/dec.csv > $L/dec.log 2>&1; t "bench decode rc=$?"
grep dscore $OUT/dec.csv | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000" | cut -d, -f2,3,8,11
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis --page source --print-source sass --csv ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/sass_nvfp4.csv 2>&1; t "ncu sass rc=$?"
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section ComputeWorkloadAnalysis --section WarpStateStats --section SpeedOfLight ./bench_indexer --what decode --formats nvfp4,fp8 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu.log 2>&1; t "ncu rc=$?"; grep -E "Duration|Issue Slots|ALU is|highest|Warp Cycles Per Issued" $L/ncu.log | head
