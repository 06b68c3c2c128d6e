#!/bin/bash
# s21 run C: plan scans (row counts into shared memory, one thread per existing row) and plan_units
# (8 threads per row): test_cuda_prefill (new test PlanShapes), memcheck / racecheck, bench_prefill
# new vs HEAD interleaved, ncu per-kernel times.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
CS=compute-sanitizer
timeout 240 ./test_cuda_prefill > $L/test_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_prefill.log) $(grep 'FAILED  \]' $L/test_prefill.log | head -3 | tr '\n' ' ')"
timeout 200 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='CudaPrefill.PlanShapes:CudaPrefill.GraphCapture' > $L/san_mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_mem.log)"
timeout 200 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='CudaPrefill.PlanShapes' > $L/san_race.log 2>&1; t "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $L/san_race.log)"
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768
for rep in 1 2; do for v in head new; do
  timeout 150 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head new; do echo "== $v"; for rep in 1 2; do cut -d, -f1-4,6,8,11-13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//' | paste -sd' '; done; done
for c in 16/1:8192:32768 16/1:8192:0; do n=$(echo $c | tr '/:' '__')
timeout 120 ncu --metrics gpu__time_duration.sum --launch-count 40 ./bench_prefill_new --cases $c --reps 1 --selection random --kernels kv_outer > $L/ncu_$n.log 2>&1; t "ncu $c rc=$?"
python3 ncu_sum.py $L/ncu_$n.log
done
