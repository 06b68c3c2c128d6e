#!/bin/bash
# s27 run F: the final bench_prefill (single-call times with the flush, then energy and the sustained
# time per call) on the floor case and (16/1, 8192, 0) and (64/4, 8192, 0), two passes, and the SDPA peer
# with its sustained regime in the same call.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for pass in 1 2; do
  timeout 200 ./bench_prefill --cases 16/1:8192:32768,16/1:8192:0,64/4:8192:0 --reps 20 --selection random --kernels kv_outer --energy-ms 2000 --csv $OUT/pf_$pass.csv > $L/pf_$pass.log 2>&1
  t "pf pass $pass rc=$?"
  (cd ../bench && timeout 150 python3 sdpa_peer.py --energy-ms 2000 > $L/sdpa_$pass.log 2>&1); t "sdpa pass $pass rc=$?"
done
cut -c1-48,118-330 $L/pf_*.log | grep prefill
cat $L/sdpa_*.log
