#!/bin/bash
# s28 run H: L2 residency of the last partials. Timing variants (macros, library defaults unchanged):
# v1 partial stores evict_normal (FLASHMSA_PART_NORMAL); v2 v1 + combine loads evict_first
# (FLASHMSA_COMBINE_EVICT_FIRST); v3 v2 + discard.global.L2 of each merged O line (FLASHMSA_COMBINE_DISCARD);
# v4 discard alone. Correctness: test_cuda_prefill on v3. Timing: interleaved, 2 passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 200 ./test_cuda_prefill_v3 > $L/tp_v3.log 2>&1; t "test_cuda_prefill v3 rc=$? $(grep -E 'PASSED|FAILED' $L/tp_v3.log | tr '\n' ' ')"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
for pass in 1 2; do
  for v in base v1 v2 v3 v4; do
    b=./bench_prefill_$v; [ $v = base ] && b=./bench_prefill
    timeout 120 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench"
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in ('base','v1','v2','v3','v4'):
      x=[]
      for i in (1,2):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','attention_us','combine_us')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.0f}/{st.median(a[2] for a in x):.0f})")
    print(case, fmt, ' | '.join(out))
PY
