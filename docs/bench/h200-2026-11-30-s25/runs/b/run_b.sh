#!/bin/bash
# Session 25 run B: V converted under Q K^T(0) (lv) and, with it, the next unit's K under the last P V (ek),
# against ov (= the working tree's default: Q8RS QK(n+1) under PV(n), conflict-free conversion) and HEAD (base).
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for m in none plain tensor bulk; do
  timeout 30 compute-sanitizer --tool initcheck --print-limit 2 ./initcheck_tma $m > $L/initcheck_tma_$m.log 2>&1
  t "initcheck_tma $m rc=$? $(grep -m1 '^mode' $L/initcheck_tma_$m.log) | $(grep 'ERROR SUMMARY' $L/initcheck_tma_$m.log)"
done
for v in lv ek; do
  timeout 100 ./test_cuda_prefill_$v > $L/test_pf_$v.log 2>&1; t "test_cuda_prefill_$v rc=$? ok=$(grep -c 'OK \]' $L/test_pf_$v.log) $(grep 'FAILED  \]' $L/test_pf_$v.log | head -3 | tr '\n' ' ')"
done
for cfg in FLASHMSA_PREFILL_TILES_PER_UNIT=1 FLASHMSA_PREFILL_TILES_PER_UNIT=2 FLASHMSA_PREFILL_TAIL_TILES=4; do
  env $cfg timeout 100 ./test_cuda_prefill_ek > $L/test_pf_ek_$cfg.log 2>&1; t "ek [$cfg] rc=$? ok=$(grep -c 'OK \]' $L/test_pf_ek_$cfg.log) $(grep 'FAILED  \]' $L/test_pf_ek_$cfg.log | head -3 | tr '\n' ' ')"
done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do for v in base ov lv ek; do
  timeout 60 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
timeout 60 $CS --tool memcheck ./test_cuda_prefill_ek --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*:*TailUnits*' > $L/san_ek.log 2>&1; t "memcheck ek rc=$? $(grep 'ERROR SUMMARY' $L/san_ek.log)"
timeout 90 $CS --tool racecheck ./test_cuda_prefill_ek --gtest_filter='*LseOff*:*HeadMajorQuery*:*SingleRequest*' > $L/race_ek.log 2>&1; t "racecheck ek rc=$? $(grep 'RACECHECK SUMMARY' $L/race_ek.log)"
timeout 60 $CS --tool synccheck ./test_cuda_prefill_ek --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/sync_ek.log 2>&1; t "synccheck ek rc=$? $(grep 'ERROR SUMMARY' $L/sync_ek.log)"
