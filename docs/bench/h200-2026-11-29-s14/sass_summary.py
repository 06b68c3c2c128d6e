#!/usr/bin/env python3
"""Summarise an `ncu --page source --csv --print-source sass` export: instructions grouped
by how often they executed (loop bodies), opcode mix of the heaviest groups, and the
instructions with the most warp-stall samples (argv[2] of them, default 14)."""
import collections, csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hi = next(i for i, r in enumerate(rows) if 'Source' in r)
h = rows[hi]
cs, ce, cw = h.index('Source'), h.index('Instructions Executed'), h.index('Warp Stall Sampling (All Samples)')
def num(x):
    try: return float(x.replace(',', ''))
    except ValueError: return 0.0
body = [r for r in rows[hi + 1:] if len(r) > max(cs, ce, cw)]
def op(r):
    t = r[cs].split()
    return (t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?'))
te = sum(num(r[ce]) for r in body); tw = sum(num(r[cw]) for r in body)
print(f'executed {te:.0f} samples {tw:.0f} sass {len(body)}')
cls = collections.defaultdict(list)
for r in body: cls[num(r[ce])].append(r)
for e, rs in sorted(cls.items(), key=lambda kv: -kv[0] * len(kv[1]))[:6]:
    c = collections.Counter(op(r) for r in rs)
    sm = sum(num(r[cw]) for r in rs)
    print(f'x{e:.0f}: {len(rs)} inst, {e*len(rs)/te*100:.1f}% exec, {sm/tw*100:.1f}% samples:',
          ' '.join(f'{k}:{v}' for k, v in c.most_common(18)))
print('top stall instructions:')
top = int(sys.argv[2]) if len(sys.argv) > 2 else 14  # instructions listed (session 16 used 40)
for r in sorted(body, key=lambda r: -num(r[cw]))[:top]:
    print(f'  {num(r[cw]):6.0f} x{num(r[ce]):.0f} {r[cs][:80]}')
