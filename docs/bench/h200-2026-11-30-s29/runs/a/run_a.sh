#!/bin/bash
# s29 run A: upper bound of fewer partial bytes. Timing-only variants (wrong outputs):
# c96: partial rows of 96 BF16 (192 B stride, TMA store clipped at column 96, combine reads 96);
# c64: rows of 64 (128 B). base: the library. Interleaved, 2 passes.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
V="base c96 c64"
for pass in 1 2; do
  for v in $V; do
    b=./bench_prefill_$v; [ $v = base ] && b=./bench_prefill
    timeout 120 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench"
V="$V" python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']; V=os.environ['V'].split()
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in V:
      x=[]
      for i in (1,2):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','attention_us','combine_us')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.0f}/{st.median(a[2] for a in x):.0f})")
    print(case, fmt, ' | '.join(out))
PY
