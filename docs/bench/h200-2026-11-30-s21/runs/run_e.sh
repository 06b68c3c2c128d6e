#!/bin/bash
# s21 run E: L2 policy experiments for the partials: the last FLASHMSA_PREFILL_L2_KEEP units store
# evict_last (k: 0 / 48 / 96 / 160), and the combine's partial loads as ld.global.nc.L2::256B (cld).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:32768
for rep in 1 2; do for v in new2 k0 k48 k96 k160 cld; do
  b=./bench_prefill_k; keep=${v#k}; [ $v = new2 ] && b=./bench_prefill_new2 && keep=0; [ $v = cld ] && b=./bench_prefill_cld && keep=0
  FLASHMSA_PREFILL_L2_KEEP=$keep timeout 150 $b --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$rep.csv > $L/pf_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
for v in new2 k0 k48 k96 k160 cld; do echo "== $v"; for rep in 1 2; do cut -d, -f1-4,6,8,13 $OUT/pf_${v}_$rep.csv | tail -n +2 | sed 's/,random//;s/^16,1,//;s/^64,4,/64:/' | paste -sd' '; done; done
