#!/bin/bash
# s28 run B: the own page inside a warp-specialised combine (warpgroup 0 the own page, warpgroup 1 the merge through a cp.async ring). Correctness: test_cuda_prefill in full,
# then memcheck / racecheck on MissingOwnPage. Timing: new vs HEAD (base), interleaved,
# 2 passes, random inputs + flush.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
s() { grep -E "PASSED|FAILED" $1 | tr '\n' ' ' | cut -c1-400; }
timeout 200 ./test_cuda_prefill > $L/tp.log 2>&1; t "test_cuda_prefill rc=$? $(s $L/tp.log)"
grep -B2 -A8 "Failure" $L/tp.log | head -60
timeout 150 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*MissingOwnPage*' > $L/san_mem.log 2>&1; t "memcheck rc=$? $(grep 'ERROR SUMMARY' $L/san_mem.log)"
timeout 200 compute-sanitizer --print-limit 5 --tool racecheck ./test_cuda_prefill --gtest_filter='*MissingOwnPage*' > $L/san_race.log 2>&1; t "racecheck rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_race.log | tr '\n' ' ')"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,16/1:16384:114688
for pass in 1 2; do
  for v in new base; do
    b=./bench_prefill; [ $v = base ] && b=./bench_prefill_base
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
    for v in ('new','base'):
      x=[]
      for i in (1,2):
        try:
          for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
            if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us')])
        except Exception as e: pass
      if x: out.append(f"{v} {' '.join(f'{a[0]:.1f}' for a in x)} med {st.median(a[0] for a in x):.1f} ({st.median(a[1] for a in x):.1f}/{st.median(a[2] for a in x):.1f}/{st.median(a[3] for a in x):.1f})")
    print(case, fmt, ' | '.join(out))
PY
