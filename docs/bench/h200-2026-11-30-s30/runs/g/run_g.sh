#!/bin/bash
# s30 run G: plan_units_bucketed starts on the count kernel's tickets (spin on size_count[0]) instead of its
# completion, and waits for that completion only before it ends. Correctness: test_cuda_prefill (x3: a hang or
# race would show), memcheck, racecheck, synccheck. Timeline at two shapes. Timing: base / f (run F's build) / new.
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
for r in 1 2 3; do timeout 200 ./test_cuda_prefill > $L/tp_$r.log 2>&1; t "test_cuda_prefill $r rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tp_$r.log | tr '\n' ' ')"; done
timeout 150 compute-sanitizer --tool memcheck ./test_cuda_prefill --gtest_filter='*Bucketed*:*GraphCapture*:*TailUnits*' > $L/memcheck.log 2>&1; t "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool racecheck ./test_cuda_prefill --gtest_filter='*Bucketed*' > $L/racecheck.log 2>&1; t "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool synccheck ./test_cuda_prefill --gtest_filter='*Bucketed*' > $L/synccheck.log 2>&1; t "synccheck rc=$? $(grep -E 'ERROR SUMMARY' $L/synccheck.log | tr '\n' ' ')"
for c in 16/1:8192:32768 64/4:8192:32768; do
  n=$(echo $c | tr '/:' '__')
  timeout 120 ./bench_prefill_tl --cases $c --reps 20 --selection random --kernels kv_outer --csv $OUT/tl_$n.csv > $L/tl_$n.log 2>&1
  t "timeline $c rc=$?"
  grep -E "^timeline (10) " $L/tl_$n.log
done
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
V="base f new"
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
