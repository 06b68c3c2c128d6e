#!/bin/bash
# Session 25 run A: conflict-free page conversion + no loop-top bulk wait (cf) and the Q8RS overlap (ov, QK(n+1)
# issued before PV(n) retires) against HEAD f9c8685 (base); initcheck on TMA stores; the CLI check.
# (Reconstructed from the session transcript: the file in .devbin/ was deleted after the run.)
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for m in none plain tensor bulk; do
  timeout 30 compute-sanitizer --tool initcheck --print-limit 2 ./initcheck_tma $m > $L/initcheck_tma_$m.log 2>&1
  t "initcheck_tma $m rc=$? $(grep -m1 '^mode' $L/initcheck_tma_$m.log) | $(grep 'ERROR SUMMARY' $L/initcheck_tma_$m.log)"
done
for v in cf ov; do
  timeout 120 ./test_cuda_prefill_$v > $L/test_pf_$v.log 2>&1; t "test_cuda_prefill_$v rc=$? ok=$(grep -c 'OK \]' $L/test_pf_$v.log) $(grep 'FAILED  \]' $L/test_pf_$v.log | head -3 | tr '\n' ' ')"
done
grep -h "TailUnits" $L/test_pf_cf.log | head -3
FLASHMSA_PREFILL_TILES_PER_UNIT=1 timeout 100 ./test_cuda_prefill_ov > $L/test_pf_ov_tpu1.log 2>&1; t "ov tiles/unit 1 rc=$? ok=$(grep -c 'OK \]' $L/test_pf_ov_tpu1.log)"
timeout 120 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode (cf) rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'FAILED  \]' $L/test_cuda_decode.log | head -3 | tr '\n' ' ')"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3; do for v in base cf ov; do
  timeout 60 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_${v}_$pass.csv > $L/b_${v}_$pass.log 2>&1
  echo "$v $pass: $(cut -d, -f1,3,4,6,8,11-13 $OUT/b_${v}_$pass.csv | tail -n +2 | paste -sd' ')"
done; done
t "bench done"
CS="compute-sanitizer --print-limit 5"
for v in cf ov; do
  timeout 60 $CS --tool memcheck ./test_cuda_prefill_$v --gtest_filter='*PlanShapes*:*LseOff*:*HeadMajorQuery*' > $L/san_$v.log 2>&1; t "memcheck $v rc=$? $(grep 'ERROR SUMMARY' $L/san_$v.log)"
  timeout 60 $CS --tool racecheck ./test_cuda_prefill_$v --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/race_$v.log 2>&1; t "racecheck $v rc=$? $(grep 'RACECHECK SUMMARY' $L/race_$v.log)"
done
timeout 60 $CS --tool synccheck ./test_cuda_prefill_ov --gtest_filter='*LseOff*' > $L/sync_ov.log 2>&1; t "synccheck ov rc=$? $(grep 'ERROR SUMMARY' $L/sync_ov.log)"
timeout 100 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check (cf) rc=$? $(tail -1 $L/run_cuda.log)"
timeout 60 ./bench_decode --suite full --heads 64/4 --formats nvfp4 --csv $OUT/decode_nvfp4_cf.csv > $L/decode.log 2>&1; t "bench_decode nvfp4 rc=$?"
timeout 40 $CS --tool initcheck ./test_cuda_prefill_cf --gtest_filter='*LseOff*' > $L/initcheck_pf.log 2>&1; t "initcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/initcheck_pf.log) $(grep -m3 'Uninitialized.*access\|in .*prefill' $L/initcheck_pf.log | cut -c1-120 | tr '\n' ' ')"
