#!/bin/bash
# s19 peer run: the Triton decode-indexer peer (FP8 tl.dot + torch.topk) and bench_indexer
# (HEAD) on the same H200 in one run; E4M3 index q / index-K, 4 heads, Q 8.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 100 ./bench_indexer --what decode --suite full --formats fp8,nvfp4 --reps 10 --csv $OUT/ours.csv > $L/ours.log 2>&1; t "bench_indexer rc=$?"
(cd ../bench && timeout 200 python3 triton_indexer_peer.py > $L/peer.log 2>&1); t "triton peer rc=$?"
cat $L/peer.log | tail -14
grep -E "^decode" $OUT/ours.csv | grep -E "b(32|64|128)_s(10000|50000|100000)_" | cut -d, -f2,3,8,11 | paste -sd' '
