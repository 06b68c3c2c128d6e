#!/bin/bash
# Session 13 final H200 run, part B: decode and indexer benchmarks with the Triton peers
# side by side (same GPU, same run), then the Python extension and its tests.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1.csv > $L/bench_decode_q1.log 2>&1; t "bench_decode q1 rc=$?"
FLASHMSA_DECODE_KERNEL=tile timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q 1 --calls 60 --reps 10 --csv $OUT/decode_lowlat_q1_tile.csv > $L/bench_decode_q1_tile.log 2>&1; t "bench_decode q1 tile rc=$?"
(cd .. && timeout 150 python3 bench/triton_decode_peer.py > $L/triton_decode_peer.log 2>&1); t "triton decode peer rc=$?"; grep -v "^check" $L/triton_decode_peer.log
timeout 200 ./bench_decode --suite all --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --calls 40 --reps 10 --csv $OUT/decode.csv > $L/bench_decode.log 2>&1; t "bench_decode all rc=$?"
(cd .. && timeout 150 python3 bench/triton_indexer_peer.py > $L/triton_indexer_peer.log 2>&1); t "triton indexer peer rc=$?"
timeout 150 ./bench_indexer --csv $OUT/indexer.csv > $L/bench_indexer.log 2>&1; t "bench_indexer rc=$?"
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 200 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
grep -E "FAILED|Fatal" $L/pytest.log | head -8
