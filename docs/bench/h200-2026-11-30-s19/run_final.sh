#!/bin/bash
# Session 19 closing H200 run (HEAD build): every GPU test, sanitizers, the CLI check,
# bench_indexer decode + top-k, bench_prefill, bench_decode (old = eed005d build and new,
# for the NVFP4 lookup in the decode attention); pip + pytest if the device time allows.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
for x in test_cuda_prefill test_cuda_indexer test_cuda_decode test_cuda_gmma test_cuda_fused test_cuda_cache test_cuda_nvfp4_selected test_quant_device_host; do
  timeout 150 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
grep "Fp8QkPrecision \]" $L/test_cuda_indexer.log | cut -c1-110
CS="compute-sanitizer --print-limit 5"
timeout 100 $CS --tool memcheck ./test_cuda_indexer --gtest_filter='*Decode*:*Prefill*:*ExactTies*:*Topk*' > $L/san_ix.log 2>&1; t "memcheck indexer rc=$? $(grep 'ERROR SUMMARY' $L/san_ix.log)"
timeout 120 $CS --tool memcheck ./test_cuda_prefill --gtest_filter='*LseOff*:*HeadMajorQuery*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 100 $CS --tool racecheck ./test_cuda_prefill --gtest_filter='*LseOff*' > $L/race_pf.log 2>&1; t "racecheck prefill rc=$? $(grep 'RACECHECK SUMMARY' $L/race_pf.log)"
timeout 120 $CS --tool memcheck ./test_cuda_decode --gtest_filter='*Nvfp4*:*NarrowTopk*' > $L/san_dec.log 2>&1; t "memcheck decode rc=$? $(grep 'ERROR SUMMARY' $L/san_dec.log)"
timeout 60 $CS --tool memcheck ./test_cuda_gmma --gtest_filter='*Nvfp4*' > $L/san_gmma.log 2>&1; t "memcheck gmma rc=$? $(grep 'ERROR SUMMARY' $L/san_gmma.log)"
timeout 150 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
timeout 120 ./bench_indexer --what decode,topk --suite full --reps 10 --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer decode rc=$?"
grep -E "^(decode|dscore)" $OUT/indexer.csv | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000" | grep -v s5000_ | cut -d, -f1,2,3,8,11 | paste -sd' '
grep "^topk" $OUT/indexer.csv | cut -d, -f2,8 | paste -sd' '
timeout 200 ./bench_prefill --reps 10 --selection random --kernels kv_outer --csv $OUT/prefill.csv > $L/bench_prefill.log 2>&1; t "bench_prefill rc=$?"
cut -d, -f1-7,9-11 $OUT/prefill.csv | grep -E "8192,32768|hq"
for v in old new; do s=""; [ $v = old ] && s=_old
  timeout 200 ./bench_decode$s --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode_$v.csv > $L/bench_decode_$v.log 2>&1; t "bench_decode $v rc=$?"
done
if [ $((SECONDS - T0)) -lt 380 ]; then
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 150 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 120 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
fi
