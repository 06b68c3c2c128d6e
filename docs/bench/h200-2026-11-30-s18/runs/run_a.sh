#!/bin/bash
# s18 run A (session start, HEAD 226f0c7): s17 leftovers (run_next.sh) + ncu of the decode scoring kernel (nvfp4 vs fp8).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 120 ./test_cuda_indexer --gtest_filter='*ReleaseCachedWorkspace*:*Prefill*' > $L/ix.log 2>&1; t "test_cuda_indexer Release+Prefill rc=$? ok=$(grep -c 'OK \]' $L/ix.log) $(grep 'FAILED  \]' $L/ix.log | head -3 | tr '\n' ' ')"
timeout 120 ./test_cuda_prefill --gtest_filter='*GraphCapture*' > $L/pf_capture.log 2>&1; t "test_cuda_prefill GraphCapture alone rc=$? ok=$(grep -c 'OK \]' $L/pf_capture.log) $(grep 'FAILED  \]' $L/pf_capture.log | head -3 | tr '\n' ' ')"
timeout 60 ./bench_indexer --what decode --formats fp8,nvfp4 --case b64_s100000 --reps 10 --csv $OUT/dec.csv > $L/dec.log 2>&1; t "bench decode rc=$?"; cut -d, -f1-3,8,11 $OUT/dec.csv
for f in nvfp4 fp8; do
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --set full --import-source no --page details ./bench_indexer --what decode --formats $f --case b64_s100000 --reps 1 --calls 2 --no-split > $L/ncu_$f.log 2>&1; t "ncu $f rc=$?"
grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occ|DRAM Throughput|Compute \(SM\) Thr|No Eligible|One or More" $L/ncu_$f.log | head -12
timeout 120 ncu --kernel-name-base mangled --kernel-name regex:decode_score --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv ./bench_indexer --what decode --formats $f --case b64_s100000 --reps 1 --calls 2 --no-split > $L/sass_$f.csv 2>&1; t "ncu sass $f rc=$?"
done
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal|error:" $L/pytest.log $L/pip.log | head -8
# The sass_*.csv files are archived as sass_*.summary.txt (opcode counts and stall shares, /tmp/sass_sum.py-style).
