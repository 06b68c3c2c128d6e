#!/bin/bash
# Session 23 run P: v4 = v3 without the mask-limit prefetch (v2's); v5 = v4 + tiles per unit chosen by shape (32 where
# every SM gets >= 4 units, else 24). Tests of v4 and v5, bench base/v3/v4/v5 interleaved (two passes), v4 tiles-per-unit
# sweep, ncu source-level profile of v5 (BF16 and Q8KV4 attention kernels).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_prefill_v4 test_cuda_prefill_v5; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2; do
  for b in bench_prefill bench_prefill_v3 bench_prefill_v4 bench_prefill_v5; do
    timeout 80 ./$b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/${b}_$pass.csv > $L/${b}_$pass.log 2>&1; t "$b pass $pass rc=$?"
    cut -d, -f1-4,6,8 $OUT/${b}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
for u in 24 28 32 40; do
  FLASHMSA_PREFILL_TILES_PER_UNIT=$u timeout 80 ./bench_prefill_v4 --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/v4_tpu$u.csv > $L/v4_tpu$u.log 2>&1; t "v4 tpu $u rc=$?"
  cut -d, -f1-4,6,8 $OUT/v4_tpu$u.csv | tail -n +2 | paste -sd' '
done
grep -h "16/1 q_len   8192 prefix   32768" $L/bench_prefill*_2.log
for k in ILi0ELb0 ILi2ELb1; do
  timeout 200 ncu -o $L/rep_$k --section SourceCounters --section WarpStateStats --section InstructionStats --kernel-name-base mangled --kernel-name regex:"prefill_attention$k" --launch-count 1 ./bench_prefill_v5 --cases 16/1:8192:32768 --reps 1 --selection random --kernels kv_outer > $L/ncu_run_$k.log 2>&1; t "ncu $k rc=$?"
  ncu -i $L/rep_$k.ncu-rep --page source --print-source sass --csv > $L/source_$k.csv 2>&1; t "source rc=$?"; rm -f $L/rep_$k.ncu-rep; gzip $L/source_$k.csv
done
