#!/bin/bash
# s20 run K: interleaved A/B of the refactor (run J) against HEAD (f19d1b0), decode suite, both formats.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for rep in 1 2 3; do for v in head new; do b=./bench_indexer; [ $v = head ] && b=./bench_indexer_head
  timeout 100 $b --what decode --suite full --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "bench $v $rep rc=$?"
done; done
