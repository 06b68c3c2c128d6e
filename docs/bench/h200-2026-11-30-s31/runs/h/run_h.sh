#!/bin/bash
# Session 31 run H: the opt-in QGMMA prefill scorer on 256-row wide tiles (E4M3 index K): tests,
# memcheck, then bench_indexer prefill exact / e4m3 (wide) / e4m3 with FLASHMSA_INDEXER_WIDE=0 (128-row
# tiles, the session-30 QGMMA path), two interleaved passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 150 ./test_cuda_indexer --gtest_filter='*PrefillE4m3Qgmma*:*Fp8QkPrecision*:*PrefillVarlen*:*PrefillOneHead*:*PrefillLarge*:*DecodeNvfp4Qgmma*' > $L/test.log 2>&1; t "test rc=$? $(grep 'PASSED\|FAILED  \]' $L/test.log | head -4 | tr '\n' ' ')"
grep "Fp8QkPrecision \]" $L/test.log | cut -c1-110
grep -m5 "Failure\|page_scores\[" $L/test.log | cut -c1-200
timeout 120 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer --gtest_filter='*PrefillE4m3Qgmma*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck.log)"
for rep in 1 2; do
  timeout 120 ./bench_indexer --what prefill --reps 10 --csv $OUT/pf_exact_$rep.csv > $L/pf_exact_$rep.log 2>&1; t "exact $rep rc=$?"
  timeout 120 ./bench_indexer --what prefill --reps 10 --fp8-qk e4m3 --csv $OUT/pf_e4m3_$rep.csv > $L/pf_e4m3_$rep.log 2>&1; t "e4m3 $rep rc=$?"
  FLASHMSA_INDEXER_WIDE=0 timeout 120 ./bench_indexer --what prefill --reps 10 --fp8-qk e4m3 --csv $OUT/pf_e4m3n_$rep.csv > $L/pf_e4m3n_$rep.log 2>&1; t "e4m3 narrow $rep rc=$?"
done
grep "e4m3/" $L/pf_*_2.log | grep q2048 | cut -c1-150
