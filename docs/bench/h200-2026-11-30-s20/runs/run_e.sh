#!/bin/bash
# s20 run E: op throughput microbenchmark (runs/e/ubench.cu, nvcc -O3 -gencode=arch=compute_90a,code=sm_90a);
# HEAD (4 E4M3 groups) indexer tests + sanitizers + CLI; ncu pipe utilisation of the NVFP4 warp kernel.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
./ubench
timeout 200 ./test_cuda_indexer > $L/test_cuda_indexer.log 2>&1; t "test_cuda_indexer rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_indexer.log)"
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeE4m3Shapes:CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/memcheck.log 2>&1; t "memcheck rc=$?"
timeout 150 compute-sanitizer --tool racecheck ./test_cuda_indexer --gtest_filter='CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/racecheck.log 2>&1; t "racecheck rc=$?"
timeout 200 ./flashmsa run --device cuda --check > $L/run_cuda.log 2>&1; t "flashmsa run cuda rc=$?"
timeout 150 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --metrics regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$ ./bench_indexer --what decode --formats nvfp4 --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu_pipes.log 2>&1
