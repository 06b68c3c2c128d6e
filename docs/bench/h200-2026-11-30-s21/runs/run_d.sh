#!/bin/bash
# s21 run D: the QK16 query widening moved from plan_count into plan_fill's pre-wait part (under the
# scans and plan_units). test_cuda_prefill, memcheck, bench_prefill new2 vs HEAD interleaved.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 240 ./test_cuda_prefill > $L/test_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_prefill.log) $(grep 'FAILED  \]' $L/test_prefill.log | head -3 | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='CudaPrefill.HeadMajorQuery:CudaPrefill.GraphCapture' > $L/san_mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_mem.log)"
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768
for rep in 1 2 3; do for v in head new2; do
  timeout 150 ./bench_prefill_$v --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head new2; do echo "== $v"; for rep in 1 2 3; do cut -d, -f1-4,6,8,11-13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//' | grep -v bf16 | paste -sd' '; done; done
