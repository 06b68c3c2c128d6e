import re, sys, collections
# Sums ncu "--metrics gpu__time_duration.sum" per kernel name; prints launches and median us per kernel.
name = None; d = collections.defaultdict(list); order = []
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s+(?:void )?(\S.*?)\(.*\)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m:
        name = re.sub(r"^.*::", "", m.group(1)); continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "nsecond" else v * 1000 if m.group(1) == "msecond" else v
        if name not in d: order.append(name)
        d[name].append(v)
for k in order:
    v = sorted(d[k]); print(f"{k:60s} n={len(v):3d} median={v[len(v)//2]:9.2f} us  all={' '.join(f'{x:.1f}' for x in d[k][:12])}")
