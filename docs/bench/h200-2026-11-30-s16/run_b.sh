#!/bin/bash
# Session 16, H200 run B: widening of the E4M3 query moved into plan_count; PDL modes
# (FLASHMSA_PREFILL_PDL bit 0 attention, bit 1 combine; the attention kernel no longer
# triggers early) and tiles per work unit (FLASHMSA_PREFILL_TILES_PER_UNIT) at the floor
# shape; tests.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -4 | tr '\n' ' ')"
C=16/1:8192:32768
for pdl in 0 1 2 3; do
  FLASHMSA_PREFILL_PDL=$pdl timeout 100 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_pdl$pdl.csv > /dev/null 2>&1
  echo "pdl=$pdl $(cut -d, -f6,8,11-13 $OUT/b_pdl$pdl.csv | tail -3 | tr '\n' ' ')"
done
for tpu in 4 6 12 16 24; do
  FLASHMSA_PREFILL_TILES_PER_UNIT=$tpu timeout 100 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/b_tpu$tpu.csv > /dev/null 2>&1
  echo "tpu=$tpu $(cut -d, -f6,8,11-13 $OUT/b_tpu$tpu.csv | tail -3 | tr '\n' ' ')"
done
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill_b.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-4,6,8-15 $OUT/prefill_b.csv
