#!/bin/bash
# s26 closing run, part 2, on the final source (the plan_fill sort's early loads made the default; its SASS
# equals run E's "se" build): test_cuda_prefill, memcheck, the CLI check, 4 interleaved passes x 20 replays
# against the session-25 HEAD build (base), then pip install + pytest and the 128 prefill cases through the CLI.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv *.json 2>/dev/null' EXIT
timeout 150 ./test_cuda_prefill > $L/test_cuda_prefill.log 2>&1; t "test_cuda_prefill rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_prefill.log) $(grep 'FAILED  \]' $L/test_cuda_prefill.log | head -3 | tr '\n' ' ')"
timeout 100 compute-sanitizer --print-limit 5 --tool memcheck ./test_cuda_prefill --gtest_filter='*PlanShapes*:*TailUnits*:*LseOff*' > $L/san_pf.log 2>&1; t "memcheck prefill rc=$? $(grep 'ERROR SUMMARY' $L/san_pf.log)"
timeout 120 ./flashmsa run --device cuda --check --json $OUT/run_cuda.json > $L/run_cuda.log 2>&1; t "flashmsa run --device cuda --check rc=$? $(tail -1 $L/run_cuda.log)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688
for pass in 1 2 3 4; do
  for v in base final; do
    b=./bench_prefill; [ $v = base ] && b=./bench_prefill_base
    timeout 90 $b --cases $C --reps 20 --selection random --kernels kv_outer --csv $OUT/pf_${v}_$pass.csv > $L/pf_${v}_$pass.log 2>&1
  done
done
t "bench passes"
python3 - <<'PY'
import csv,os,statistics as st
O=os.environ['OUT']
for case in "16/1:8192:32768,16/1:8192:0,64/4:8192:32768,64/4:8192:0,16/1:16384:114688".split(','):
  for fmt in ('bf16','fp8','nvfp4'):
    out=[]
    for v in ('base','final'):
      x=[]
      for i in range(1,5):
        for r in csv.DictReader(open(f"{O}/pf_{v}_{i}.csv")):
          if f"{r['hq']}/{r['hkv']}:{r['q_len']}:{r['prefix']}"==case and r['format']==fmt: x.append([float(r[k]) for k in ('us','plan_us','attention_us','combine_us','tflops')])
      med=[st.median(c) for c in zip(*x)]
      out.append(f"{v} {med[0]:7.1f} [{min(a[0] for a in x):.1f}-{max(a[0] for a in x):.1f}] {med[4]:.1f} TF/s ({med[1]:.1f}/{med[2]:.1f}/{med[3]:.1f})")
    print(case, fmt, ' | '.join(out))
PY
(cd .. && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 240 python3 -m pip install --no-build-isolation . > $L/pip.log 2>&1); t "pip install rc=$? $(tail -1 $L/pip.log)"
(cd .. && timeout 150 python3 -m pytest tests/python -q -p no:cacheprovider > $L/pytest.log 2>&1); t "pytest rc=$? $(tail -1 $L/pytest.log)"
left=$((540 - (SECONDS - T0))); [ $left -gt 20 ] || left=20
timeout $left ./flashmsa run --device cuda --workload prefill --no-check --json $OUT/prefill128.json > $L/prefill128.log 2>&1; t "flashmsa run --workload prefill (128 cases, limit ${left}s) rc=$? $(grep -c '^\[' $L/prefill128.log) cases printed"
tail -3 $L/prefill128.log
