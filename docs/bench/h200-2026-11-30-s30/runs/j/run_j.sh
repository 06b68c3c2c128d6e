#!/bin/bash
# s30 run J: plan_units_bucketed prefetches the first tile of each attention CTA's first unit (page K/V, NVFP4
# scales, the tile's Q rows) into L2 with cp.async.bulk.prefetch. Correctness: test_cuda_prefill, memcheck.
# Timeline at the floor case. Timing: head (7976d6b) / new, 3 interleaved passes.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
timeout 250 ./test_cuda_prefill_new > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool memcheck ./test_cuda_prefill_new --gtest_filter='*Bucketed*:*TailUnits*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
timeout 120 ./bench_prefill_tl --cases 16/1:8192:32768 --reps 20 --selection random --kernels kv_outer --csv $OUT/tl.csv > $L/tl.log 2>&1; t "timeline rc=$?"
grep -E "^timeline (0|10) " $L/tl.log
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
V="head new"
for pass in 1 2 3; do
  for v in $V; do
    timeout 120 ./bench_prefill_$v --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench"
V="$V" C="$C" python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']; V=os.environ['V'].split()
for case in os.environ['C'].split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in V:
      x=[]
      for i in (1,2,3):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
        except Exception: pass
      if x: out.append(f"{v} {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.0f}/{st.median(a[3] for a in x):.0f}) [{' '.join(f'{a[0]:.1f}' for a in x)}]")
    print(case, fmt, ' | '.join(out))
PY
