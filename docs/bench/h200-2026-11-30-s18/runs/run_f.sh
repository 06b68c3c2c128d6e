#!/bin/bash
# s18 run F: f16x2_pair (both halves of an E4M3 word converted in one asm block, so the high
# half is read in place, F2FP ... R.H1, without a shift) in the decode scoring kernel and the
# decode warp-MMA attention. Tests on the new build; old (3130013) and new benchmarks interleaved.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_decode test_cuda_nvfp4_selected; do
  timeout 150 ./${x}_new > $L/$x.log 2>&1; t "$x (new) rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_decode_new --gtest_filter='*Nvfp4*:*NarrowTopk*' > $L/san_dec.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_dec.log)"
for rep in 1 2; do for v in old new; do
  s=""; [ $v = new ] && s=_new
  timeout 100 ./bench_indexer$s --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
  timeout 150 ./bench_decode$s --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/dec_${v}_$rep.csv > $L/dec_${v}_$rep.log 2>&1; t "bench_decode $v $rep rc=$?"
done; done
