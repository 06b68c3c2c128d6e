#!/bin/bash
# s21 run G: partials in CSR list order (FLASHMSA_PART_LISTORDER=1, "lo"): a unit's tiles write
# contiguous partial rows; the combine finds them through pos_of (written by plan_fill).
# test_cuda_prefill on it, then bench_prefill HEAD vs lo interleaved x3.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill_lo > $L/test_prefill_lo.log 2>&1; t "test_cuda_prefill lo rc=$? ok=$(grep -c 'OK \]' $L/test_prefill_lo.log) $(grep 'FAILED  \]' $L/test_prefill_lo.log | head -3 | tr '\n' ' ')"
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768
for rep in 1 2 3; do for v in head lo; do b=./bench_prefill; [ $v = lo ] && b=./bench_prefill_lo
  timeout 150 $b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in head lo; do echo "== $v (us, attention, combine)"; for rep in 1 2 3; do cut -d, -f1-4,6,8,12,13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//;s/^16,1,//;s/^64,4,/64:/' | paste -sd' '; done; done
