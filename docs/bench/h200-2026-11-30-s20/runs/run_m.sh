#!/bin/bash
# s20 run M: review clean-up (one gmma rs helper, nvfp4x16_lookup, DecRequest / dec_load_q32 shared by both
# decode scoring kernels; SASS of decode attention, warp-MMA decode, prefill, selftest identical; the
# indexer's decode kernels rescheduled): indexer tests, CLI check, interleaved A/B against HEAD.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log) $(grep 'FAILED  \]' $L/test_cuda_indexer.log | head -3 | tr '\n' ' ')"
timeout 60 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do for v in head new; do b=./bench_indexer; [ $v = head ] && b=./bench_indexer_head
  timeout 60 $b --what decode --suite full --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
