#!/bin/bash
# For session 18, first device call: what session 17 could not run on the GPU (its device
# time ran out). Copy test_cuda_indexer, test_cuda_prefill and this script into .devbin/
# (built from HEAD) and run it there with carry [".devbin"]:
#  - CudaIndexer.ReleaseCachedWorkspace (release_cached_workspace on a live pool) and the
#    prefill indexer tests after the host-only follow-ups of 76a27f7;
#  - CudaPrefill.GraphCapture alone in a fresh process: the workspace pool is then
#    created during the capture (relaxed capture mode, 76a27f7);
#  - the Python binding built as C++20 (c3675dd) with the machine's torch, and pytest
#    (test_cuda.py::test_release_cached_workspace is new).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs 2>/dev/null' EXIT
timeout 120 ./test_cuda_indexer --gtest_filter='*ReleaseCachedWorkspace*:*Prefill*' > $L/ix.log 2>&1; t "test_cuda_indexer Release+Prefill rc=$? ok=$(grep -c 'OK \]' $L/ix.log) $(grep 'FAILED  \]' $L/ix.log | head -3 | tr '\n' ' ')"
timeout 120 ./test_cuda_prefill --gtest_filter='*GraphCapture*' > $L/pf_capture.log 2>&1; t "test_cuda_prefill GraphCapture alone rc=$? ok=$(grep -c 'OK \]' $L/pf_capture.log) $(grep 'FAILED  \]' $L/pf_capture.log | head -3 | tr '\n' ' ')"
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal|error:" $L/pytest.log $L/pip.log | head -8
