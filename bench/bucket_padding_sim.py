#!/usr/bin/env python3
"""MMA padding of a bucketed KV-outer schedule (the session-17 plan), simulated on the
issue-4 floor shape (16/1, 8192, 32768) with bench_prefill's random selection (15 random
history pages + the local page per query). A work unit is (page, query bucket of QB
consecutive queries); its rows are padded to whole M-tiles. Prints the M-tiles against
the unbucketed schedule and the partials one bucket writes (BF16 O + (m, l) per row and
slot), which must stay in the 50 MB L2 for an overlapped combine.
Usage: python3 bench/bucket_padding_sim.py [M-tile rows: 128 (default) or 64]"""
import math
import random
import sys
random.seed(1)
T, prefix, G = 8192, 32768, 16
P0 = prefix // 128
qpt = (int(sys.argv[1]) if len(sys.argv) > 1 else 128) // G  # queries per M-tile
sel = []
for t in range(T):
    local = P0 + t // 128
    hist = random.sample(range(local), 15)
    sel.append(hist + [local])
def tiles(QB):
    from collections import Counter
    tot = 0
    for b0 in range(0, T, QB):
        c = Counter()
        for t in range(b0, min(T, b0 + QB)):
            for pg in sel[t]: c[pg] += 1
        tot += sum(math.ceil(n / qpt) for n in c.values())
    return tot
base = tiles(T)
print("unbucketed tiles", base, "ideal", T * 16 / qpt)
for QB in (128, 256, 512, 1024, 2048, 4096):
    n = tiles(QB)
    ws = QB * 16 * G * (256 + 8) / 2**20
    print(f"QB {QB:5d}: tiles {n} (+{100*(n/base-1):.1f} %), partials per bucket {ws:.0f} MiB")
