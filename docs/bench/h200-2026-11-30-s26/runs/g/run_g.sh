#!/bin/bash
# s26 run G: does the order of a CSR row's entries matter to the attention kernel? The same build with 1, 8 and
# 32 sub-counters per row (FLASHMSA_PLAN_SUB_COUNTERS): 1 keeps a row's entries in atomic-arrival order (about
# query order), 8 / 32 interleave them by warp % nsub. 4 interleaved passes x 20 replays.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0
for pass in 1 2 3 4; do
  for ns in 1 8 32; do
    FLASHMSA_PLAN_SUB_COUNTERS=$ns timeout 90 ./bench_prefill_se --cases $C --reps 20 --selection random,indexer --kernels kv_outer --csv $OUT/pf_ns${ns}_$pass.csv > $L/pf_ns${ns}_$pass.log 2>&1
  done
  t "pass $pass"
done
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in ('16/1:8192:32768','16/1:8192:0'):
 for sel in ('random','indexer'):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in (1,8,32):
      x=[]
      for i in range(1,5):
        for r in csv.DictReader(open(f"{O}/pf_ns{v}_{i}.csv")):
          if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt and r['selection']==sel: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
      med=[st.median(c) for c in zip(*x)]
      out.append(f"ns{v} {med[0]:7.1f} ({med[1]:.1f}/{med[2]:.1f}/{med[3]:.1f})")
    print(case, sel, fmt, ' | '.join(out))
PY
