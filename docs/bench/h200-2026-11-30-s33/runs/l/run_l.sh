#!/bin/bash
# Session 33 run L: after the review clean-up (one shared fill of the NVFP4 block-scale tables, gmma::fill_nvfp4_luts,
# used by the decode tile kernel and the indexer's decode scorers): the NVFP4 decode and indexer decode tests.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 80 ./test_cuda_decode --gtest_filter='CudaDecode.BitwiseDeterministic:CudaDecode.*Nvfp4*:CudaDecode.PageCopiesLandingLate:CudaDecode.MessyTopk*' > $L/decode.log 2>&1; t "decode rc=$? $(grep 'PASSED\|FAILED  \]' $L/decode.log | head -3 | tr '\n' ' ')"
timeout 100 ./test_cuda_indexer --gtest_filter='CudaIndexer.Decode*:CudaIndexer.PageCopiesLandingLate' > $L/indexer.log 2>&1; t "indexer rc=$? $(grep 'PASSED\|FAILED  \]' $L/indexer.log | head -3 | tr '\n' ' ')"
