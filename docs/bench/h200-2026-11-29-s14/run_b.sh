#!/bin/bash
# Session 14, H200 run B: decode tests with NVFP4 on the dims-split kernel, low-latency
# Q1 and Q8 suites on both warp-MMA variants (all formats), and the SASS hot spots of the
# prefill attention kernel from run A's ncu report.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
timeout 200 ./test_cuda_decode > $L/test_cuda_decode.log 2>&1; t "test_cuda_decode rc=$? ok=$(grep -c 'OK \]' $L/test_cuda_decode.log) $(grep 'FAILED  \]' $L/test_cuda_decode.log | head -4 | tr '\n' ' ')"
grep -B3 -A3 'Failure' $L/test_cuda_decode.log | head -30
for k in warp_mma warp_mma_dsplit; do
  export FLASHMSA_DECODE_KERNEL=$k
  for q in 1 8; do
    timeout 100 ./bench_decode --suite low_latency --heads 64/4,16/1 --formats bf16,fp8,nvfp4 --q $q --calls 60 --reps 10 --csv $OUT/lowlat_q${q}_$k.csv > $L/bench_q${q}_$k.log 2>&1; t "bench q$q $k rc=$?"
  done
done
unset FLASHMSA_DECODE_KERNEL
python3 - <<'PY'
import csv,os
o=os.environ['OUT']
for q in (1,8):
  a={ (r['case'],r['format'],r['hq']):r for r in csv.DictReader(open(f'{o}/lowlat_q{q}_warp_mma.csv'))}
  b={ (r['case'],r['format'],r['hq']):r for r in csv.DictReader(open(f'{o}/lowlat_q{q}_warp_mma_dsplit.csv'))}
  print(f'Q{q}: case format hq splits  warp_mma_us  dsplit_us')
  for k in a:
    print(' ',*k, a[k]['splits'], b[k]['splits'], a[k]['us'], b[k]['us'])
PY
ncu -i prefill_attn.ncu-rep --page source --csv --print-source sass > $OUT/prefill_sass.csv 2>$L/sass.err; t "sass export rc=$? $(wc -c < $OUT/prefill_sass.csv)"
python3 - <<'PY'
import csv,os,collections
o=os.environ['OUT']
rows=list(csv.reader(open(f'{o}/prefill_sass.csv')))
hi=next(i for i,r in enumerate(rows) if any('Source' == x for x in r))
h=rows[hi]; print([x for x in h][:30])
def col(name):
  for i,x in enumerate(h):
    if x.startswith(name): return i
  return None
cs=col('Source'); cw=col('Warp Stall Sampling (All'); ce=col('Instructions Executed'); ca=col('Address')
def num(x):
  try: return float(x.replace(',',''))
  except: return 0.0
body=[r for r in rows[hi+1:] if len(r)>max(cs,cw or 0,ce or 0)]
byop=collections.defaultdict(lambda:[0,0,0])
for r in body:
  op=r[cs].split()[0] if r[cs].split() else '?'
  if op.startswith('@'): op=r[cs].split()[1]
  op=op.split('.')[0]
  byop[op][0]+=num(r[cw]) if cw is not None else 0
  byop[op][1]+=num(r[ce]) if ce is not None else 0
  byop[op][2]+=1
tw=sum(v[0] for v in byop.values()); te=sum(v[1] for v in byop.values())
print('total stall samples',tw,'executed',te, 'sass lines', len(body))
for op,v in sorted(byop.items(), key=lambda kv:-kv[1][1])[:28]:
  print(f'{op:12s} exec {v[1]/te*100:5.1f}%  samples {v[0]/tw*100:5.1f}%  lines {v[2]}')
print('top instructions by samples:')
for r in sorted(body,key=lambda r:-num(r[cw]))[:30]:
  print(r[ca] if ca is not None else '', r[cs][:70], num(r[cw]), num(r[ce]))
PY
