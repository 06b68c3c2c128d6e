#!/bin/bash
# Session 25 run F: the next unit claimed a tile before it is needed (lc: ticket at step ntiles-3, descriptor by
# cp.async on an mbarrier) against cv (ticket a whole unit ahead).
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 100 ./test_cuda_prefill_lc > $L/test_pf_lc.log 2>&1; t "test_cuda_prefill_lc rc=$? ok=$(grep -c 'OK \]' $L/test_pf_lc.log) $(grep 'FAILED  \]' $L/test_pf_lc.log | head -3 | tr '\n' ' ')"
for cfg in FLASHMSA_PREFILL_TILES_PER_UNIT=1 FLASHMSA_PREFILL_TILES_PER_UNIT=2 FLASHMSA_PREFILL_TILES_PER_UNIT=3 FLASHMSA_PREFILL_TAIL_TILES=4; do
  env $cfg timeout 100 ./test_cuda_prefill_lc > $L/test_pf_lc_$cfg.log 2>&1; t "lc [$cfg] rc=$? ok=$(grep -c 'OK \]' $L/test_pf_lc_$cfg.log) $(grep 'FAILED  \]' $L/test_pf_lc_$cfg.log | head -3 | tr '\n' ' ')"
done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3 4; do for v in cv lc; do
  timeout 60 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool racecheck ./test_cuda_prefill_lc --gtest_filter='*LseOff*:*HeadMajorQuery*:*SingleRequest*' > $L/race_lc.log 2>&1; t "racecheck lc rc=$? $(grep 'RACECHECK SUMMARY' $L/race_lc.log)"
timeout 60 $CS --tool memcheck ./test_cuda_prefill_lc --gtest_filter='*LseOff*:*HeadMajorQuery*:*PlanShapes*:*TailUnits*' > $L/san_lc.log 2>&1; t "memcheck lc rc=$? $(grep 'ERROR SUMMARY' $L/san_lc.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill_lc --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/sync_lc.log 2>&1; t "synccheck lc rc=$? $(grep 'ERROR SUMMARY' $L/sync_lc.log)"
