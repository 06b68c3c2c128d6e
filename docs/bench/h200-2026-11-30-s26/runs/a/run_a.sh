#!/bin/bash
# s26 run A: HBM read-stream microbenchmark (readbw); NVFP4 decode indexer with 8 block-scale
# table copies (tab8) vs the default (tests + memcheck + 2 interleaved decode-suite passes);
# prefill plan with 32 vs 8 sub-counters at the floor case (3 interleaved passes).
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
./readbw | tee $L/readbw.log; t readbw
timeout 120 ./test_cuda_indexer_tab8 > $L/test_tab8.log 2>&1; t "test_cuda_indexer_tab8 rc=$? ok=$(grep -c 'OK \]' $L/test_tab8.log) $(grep 'FAILED  \]' $L/test_tab8.log | head -3 | tr '\n' ' ')"
timeout 150 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_indexer_tab8 --gtest_filter='CudaIndexer.DecodeFormats:CudaIndexer.DecodeMtpAcrossPageBoundary' > $L/memcheck_tab8.log 2>&1; t "memcheck tab8 rc=$? $(grep 'ERROR SUMMARY' $L/memcheck_tab8.log)"
for rep in 1 2; do for v in base tab8; do
  b=./bench_indexer; [ $v = tab8 ] && b=./bench_indexer_tab8
  timeout 120 $b --what decode --suite full --formats nvfp4 --reps 10 --csv $OUT/ix_${v}_$rep.csv > $L/ix_${v}_$rep.log 2>&1; t "ix $v $rep rc=$?"
done; done
python3 - <<'PY'
import csv,os
O=os.environ['OUT']
def rd(f): return {(r['kind'],r['case']):float(r['us']) for r in csv.DictReader(open(f))}
b=[rd(f"{O}/ix_base_{i}.csv") for i in (1,2)]; v=[rd(f"{O}/ix_tab8_{i}.csv") for i in (1,2)]
for k in b[0]:
  if k[0]!='dscore': continue
  bb=min(x[k] for x in b); vv=min(x[k] for x in v)
  print(f"{k[1]:>16} dscore base {bb:8.2f} tab8 {vv:8.2f} ratio {vv/bb:.3f}")
PY
C=16/1:8192:32768
for pass in 1 2 3; do
  for ns in 0 32; do
    FLASHMSA_PLAN_SUB_COUNTERS=$ns timeout 60 ./bench_prefill --cases $C --reps 10 --selection random --kernels kv_outer --csv $OUT/pf_ns${ns}_$pass.csv > $L/pf_ns${ns}_$pass.log 2>&1; t "prefill nsub=$ns pass $pass rc=$?"
    cut -d, -f6,8,11-13 $OUT/pf_ns${ns}_$pass.csv | tail -n +2 | paste -sd' '
  done
done
