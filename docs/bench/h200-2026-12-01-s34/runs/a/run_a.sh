#!/bin/bash
# Session 34 run A: full GPU pass on HEAD 8582ce1 (every GPU test binary, sanitizers on small
# cases, the CLI check) and the decode tile kernel's fixed cost: diagnosis builds u2 (page
# union built twice) and np (no pages: union, Q tile and stores only), wrong results by design.
cd "$(dirname "$0")"; tar xJf bins.txz; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $L/smi.txt 2>&1
timeout 60 ./test_cuda_gmma > $L/test_cuda_gmma.log 2>&1; t "guard gmma rc=$? $(grep 'PASSED\|FAILED  \]' $L/test_cuda_gmma.log | head -2 | tr '\n' ' ')"
for x in test_cuda_decode test_cuda_indexer test_cuda_prefill test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'PASSED\|FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "Fp8QkPrecision \]" $L/test_cuda_indexer.log | cut -c1-110
CS="compute-sanitizer --print-limit 5"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='CudaDecode.PaddingRowsAreExactZeros:CudaDecode.SwizzledNvfp4VScales' > $L/mc_decode.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/mc_decode.log)"
timeout 120 $CS --tool racecheck ./test_cuda_decode --gtest_filter='CudaDecode.BitwiseDeterministic' > $L/rc_decode.log 2>&1; t "racecheck decode rc=$? $(grep 'RACECHECK SUMMARY' $L/rc_decode.log)"
timeout 120 $CS --tool synccheck ./test_cuda_decode --gtest_filter='CudaDecode.BitwiseDeterministic' > $L/sc_decode.log 2>&1; t "synccheck decode rc=$? $(grep 'ERROR SUMMARY' $L/sc_decode.log)"
timeout 120 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeShapes:CudaIndexer.DecodeFormats:CudaIndexer.PrefillVarlen' > $L/mc_indexer.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/mc_indexer.log)"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='CudaPrefill.FormatsAndHeadSplits' > $L/mc_prefill.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/mc_prefill.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=b32_s10000_q8,b64_s10000_q8,b128_s10000_q8,b32_s100000_q8,b128_s100000_q8
for rep in 1 2; do
  for v in def u2 np; do
    b=./bench_decode; [ $v != def ] && b=./bench_decode_$v
    timeout 90 $b --suite full --cases $C --heads 64/4,16/1 --calls 40 --reps 10 --formats fp8,bf16,nvfp4 --csv $OUT/${v}_$rep.csv > $L/${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
  done
done
