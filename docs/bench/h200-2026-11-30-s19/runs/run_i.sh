#!/bin/bash
# s19 run I: prefill_combine as one persistent CTA per SM with a 3-stage bulk-copy ring
# (the slots any of a 16-row block uses), against HEAD's 128-thread register-load combine.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*:*RandomBatches*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_pf.log 2>&1; t "racecheck prefill rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 100 $CS --tool synccheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/sync_pf.log 2>&1; t "synccheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/sync_pf.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do for v in head new; do s=""; [ $v = head ] && s=_head
  timeout 200 ./bench_prefill$s --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill_${v}_$rep.csv > $L/bench_prefill_${v}_$rep.log 2>&1; t "bench_prefill $v $rep rc=$?"
done; done
for v in head new; do echo "== $v"; cut -d, -f1-4,6,8,11-13 $OUT/prefill_${v}_2.csv; done
