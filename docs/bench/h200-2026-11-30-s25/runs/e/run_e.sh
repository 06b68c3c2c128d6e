#!/bin/bash
# Session 25 run E: NVFP4 page conversion with a 4 KB shared table per block-scale byte (tab) against cv.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 100 ./test_cuda_prefill_tab > $L/test_pf_tab.log 2>&1; t "test_cuda_prefill_tab rc=$? ok=$(grep -c 'OK \]' $L/test_pf_tab.log) $(grep 'FAILED  \]' $L/test_pf_tab.log | head -3 | tr '\n' ' ')"
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 100 ./test_cuda_prefill_tab > $L/test_pf_tab_tpu1.log 2>&1; t "tab tiles/unit 1 rc=$? ok=$(grep -c 'OK \]' $L/test_pf_tab_tpu1.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3 4; do for v in cv tab; do
  timeout 60 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | grep -v bf16 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool racecheck ./test_cuda_prefill_tab --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/race_tab.log 2>&1; t "racecheck tab rc=$? $(grep 'RACECHECK SUMMARY' $L/race_tab.log)"
timeout 60 $CS --tool memcheck ./test_cuda_prefill_tab --gtest_filter='*LseOff*:*HeadMajorQuery*:*PlanShapes*' > $L/san_tab.log 2>&1; t "memcheck tab rc=$? $(grep 'ERROR SUMMARY' $L/san_tab.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill_tab --gtest_filter='*LseOff*' > $L/sync_tab.log 2>&1; t "synccheck tab rc=$? $(grep 'ERROR SUMMARY' $L/sync_tab.log)"
