#!/bin/bash
# s19 run F: the NVFP4 lookup reads 0x01010101 from the shared table entry (no constant
# rematerialised per byte permute); head (95557b3) and new interleaved twice.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for x in test_cuda_gmma test_cuda_indexer; do
  timeout 200 ./$x > $L/$x.log 2>&1; t "$x rc=$? ok=$(grep -c 'OK \]' $L/$x.log) $(grep 'FAILED  \]' $L/$x.log | head -3 | tr '\n' ' ')"
done
for rep in 1 2; do for v in head new; do
  s=""; [ $v = head ] && s=_head
  timeout 100 ./bench_indexer$s --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench_indexer $v $rep rc=$?"
done; done
for v in head new; do grep dscore $OUT/ix_${v}_2.csv | grep -E "b32_s5|b64_s5|b128_s5|s100000|s200000" | grep -v s5000_ | cut -d, -f2,8,11 | tr '\n' ' '; echo; done
