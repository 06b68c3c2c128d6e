#!/bin/bash
# s21 run F: partials stored row-major ([T, Hq, K, 128]: a row's slots contiguous) instead of
# slot-major ([K, T, Hq, 128]) (FLASHMSA_PART_ROWMAJOR=1, "rm"): test_cuda_prefill on it, then
# bench_prefill HEAD vs rm interleaved x3.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill_rm > $L/test_prefill_rm.log 2>&1; t "test_cuda_prefill rm rc=$? ok=$(grep -c 'OK \]' $L/test_prefill_rm.log) $(grep 'FAILED  \]' $L/test_prefill_rm.log | head -3 | tr '\n' ' ')"
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768
for rep in 1 2 3; do for v in head rm; do b=./bench_prefill; [ $v = rm ] && b=./bench_prefill_rm
  timeout 150 $b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head rm; do echo "== $v (us, attention, combine)"; for rep in 1 2 3; do cut -d, -f1-4,6,8,12,13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//;s/^16,1,//;s/^64,4,/64:/' | paste -sd' '; done; done
