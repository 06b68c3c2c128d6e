#!/bin/bash
# s19 run E: run D plus per-warp tournaments merged by warp 0 (one barrier) for rows over 1,024 pages; top-k with interleaved candidates and a promoted next key (one regroup per
# second win only); tests; B (old top-k) and C interleaved: decode suites fp8+nvfp4, topk suite.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_indexer test_cuda_fused; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*Topk*:*Tie*:*Nan*' > $L/san.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
for rep in 1 2; do for v in d e; do
  s=""; [ $v = d ] && s=_d
  timeout 150 ./bench_indexer$s --what decode,topk --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
for v in d e; do echo "== $v"; grep -E "^(decode|dtopk)" $OUT/ix_${v}_2.csv | grep -E "b32_s5000,|b8_s4000|b32_s50000|b64_s100000|b128_s200000" | cut -d, -f1-3,8,11 | tr '\n' ' '; echo; grep "^topk" $OUT/ix_${v}_2.csv | cut -d, -f2,8 | tr '\n' ' '; echo; done
