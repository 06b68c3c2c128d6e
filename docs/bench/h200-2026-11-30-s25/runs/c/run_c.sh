#!/bin/bash
# Session 25 run C: page conversions with their shared loads batched ahead (cv, the working tree's default, on
# top of ov) and the bulk-copy combine (cb: 16 rows x 3 stages, on ov; cb8: 8 rows x 3 stages, on cv) against ov.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for v in cv cb cb8; do
  timeout 100 ./test_cuda_prefill_$v > $L/test_pf_$v.log 2>&1; t "test_cuda_prefill_$v rc=$? ok=$(grep -c 'OK \]' $L/test_pf_$v.log) $(grep 'FAILED  \]' $L/test_pf_$v.log | head -3 | tr '\n' ' ')"
done
for cfg in FLASHMSA_PREFILL_TILES_PER_UNIT=1 FLASHMSA_PREFILL_TAIL_TILES=4; do
  env $cfg timeout 100 ./test_cuda_prefill_cv > $L/test_pf_cv_$cfg.log 2>&1; t "cv [$cfg] rc=$? ok=$(grep -c 'OK \]' $L/test_pf_cv_$cfg.log) $(grep 'FAILED  \]' $L/test_pf_cv_$cfg.log | head -3 | tr '\n' ' ')"
done
timeout 120 ./test_cuda_decode_cv > $L/test_cuda_decode_cv.log 2>&1; t "test_cuda_decode_cv rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode_cv.log) $(grep 'FAILED  \]' $L/test_cuda_decode_cv.log | head -3 | tr '\n' ' ')"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do for v in ov cv cb cb8; do
  timeout 60 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
timeout 60 ./bench_decode_cv --suite full --heads 64/4 --formats nvfp4 --csv $OUT/decode_nvfp4_cv.csv > $L/decode_cv.log 2>&1; t "bench_decode_cv nvfp4 rc=$?"
CS="compute-sanitizer --print-limit 5"
for v in cv cb8; do
  timeout 60 $CS --tool memcheck ./test_cuda_prefill_$v --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san_$v.log 2>&1; t "memcheck $v rc=$? $(grep 'ERROR SUMMARY' $L/san_$v.log)"
  timeout 60 $CS --tool racecheck ./test_cuda_prefill_$v --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/race_$v.log 2>&1; t "racecheck $v rc=$? $(grep 'RACECHECK SUMMARY' $L/race_$v.log)"
  timeout 60 $CS --tool synccheck ./test_cuda_prefill_$v --gtest_filter='*LseOff*' > $L/sync_$v.log 2>&1; t "synccheck $v rc=$? $(grep 'ERROR SUMMARY' $L/sync_$v.log)"
done
timeout 60 $CS --tool memcheck ./test_cuda_decode_cv --gtest_filter='*Nvfp4*:*SingleSplit*' > $L/san_dec_cv.log 2>&1; t "memcheck decode cv rc=$? $(grep 'ERROR SUMMARY' $L/san_dec_cv.log)"
