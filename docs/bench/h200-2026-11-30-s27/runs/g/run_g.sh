#!/bin/bash
# s27 run G: smoke run of the final benchmark binaries after the review mend: bench_prefill default
# (no energy) and with --energy-ms 1000, sdpa_peer with and without --energy-ms, bench_decode on two cases.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 60 ./bench_prefill --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_default.csv > $L/pf_default.log 2>&1; t "pf default rc=$?"
timeout 90 ./bench_prefill --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer,query_outer --energy-ms 1000 --csv $OUT/pf_energy.csv > $L/pf_energy.log 2>&1; t "pf energy rc=$?"
(cd ../bench && timeout 100 python3 sdpa_peer.py > $L/sdpa.log 2>&1); t "sdpa rc=$?"
(cd ../bench && timeout 150 python3 sdpa_peer.py --energy-ms 1000 > $L/sdpa_energy.log 2>&1); t "sdpa energy rc=$?"
timeout 100 ./bench_decode --suite full --cases b32_s50000_q8,b1_s4000_q8 --heads 64/4 --formats fp8,nvfp4 --csv $OUT/dec.csv > $L/dec.log 2>&1; t "decode rc=$?"
cat $L/pf_default.log; cut -c1-60,180-400 $L/pf_energy.log; head -3 $OUT/pf_energy.csv; cat $L/sdpa.log $L/sdpa_energy.log; cat $OUT/dec.csv
