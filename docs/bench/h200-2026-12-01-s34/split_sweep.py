#!/usr/bin/env python3
"""Per-case times of bench_decode CSVs from several split settings (best of the passes).

  split_sweep.py NAME=FILE[,FILE...] NAME=FILE[,FILE...] ...

The first setting is the baseline; every other column is baseline time / its time (> 1:
faster than the baseline). Only tile-kernel rows of the baseline are printed, with the
tile count (query blocks x KV heads, Q <= 128 / G) and the tile rows (Q x G)."""
import csv, sys

def load(files):
    out = {}
    for f in files:
        for r in csv.DictReader(open(f)):
            k = (r['case'], r['hq'] + '/' + r['hkv'], r['format'], int(r['q']))
            us = float(r['us'])
            if k not in out or us < out[k][0]:
                out[k] = (us, int(r['splits']), r['kernel'], int(r['batch']))
    return out

sets = [(a.split('=')[0], load(a.split('=')[1].split(','))) for a in sys.argv[1:]]
name0, base = sets[0]
print('%-16s %-6s %-5s %2s %4s %4s %3s %7s | ' % ('case', 'heads', 'fmt', 'Q', 'rows', 'ctas', 'sp', name0) +
      ' '.join('%6s' % n for n, _ in sets[1:]))
for k, (us, sp, kernel, batch) in sorted(base.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[1][3], kv[0][0])):
    if kernel != 'tile':
        continue
    hq, hkv = map(int, k[1].split('/'))
    g, q = hq // hkv, k[3]
    qpc = q if q * g <= 128 else 128 // g
    ctas = (batch * q + qpc - 1) // qpc * hkv
    cols = ' '.join('%6.2f' % (us / d[k][0]) if k in d else '     -' for _, d in sets[1:])
    print('%-16s %-6s %-5s %2d %4d %4d %3d %7.1f | %s' % (k[0], k[1], k[2], q, qpc * g, ctas, sp, us, cols))
