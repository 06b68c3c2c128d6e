#!/usr/bin/env python3
"""Dense peer for bench_prefill: torch scaled_dot_product_attention on the same GPU with
the same number of keys per query (2048 = 16 pages x 128), bf16, GQA expanded. Prints
us and effective TFLOP/s (4 x 128 x Hq per query-key pair) as bench_prefill does, timed
the way bench_prefill times the KV-outer path (one call in a CUDA graph, median of
replays, each after a 180 MiB L2 flush; peer_timing.py), with the plain-call median as
`eager` (also after a flush). `--flush 0` drops the flushes (the method of sessions 1-26)."""
import sys

from peer_timing import graph_us_per_call

import torch
import torch.nn.functional as F

COLD_BYTES = 3 * 60 * 1024 * 1024  # bench_util.h kColdBytes
flush_bytes = 0 if "--flush" in sys.argv and sys.argv[sys.argv.index("--flush") + 1] == "0" else COLD_BYTES
flush = torch.empty(max(flush_bytes, 1), dtype=torch.uint8, device="cuda")
cases = [(16, 1, 8192), (64, 4, 8192), (16, 1, 16384)]
for hq, hkv, t in cases:
    q = torch.randn(1, hq, t, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, hq, 2048, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, hq, 2048, 128, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    times = []
    for r in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if flush_bytes:
            flush.fill_(r & 0xFF)
        e0.record()
        F.scaled_dot_product_attention(q, k, v)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    eager = sorted(times)[len(times) // 2] * 1000
    us = graph_us_per_call(lambda c: F.scaled_dot_product_attention(q, k, v), calls=1, reps=10, flush_bytes=flush_bytes)
    tf = 4 * 128 * hq * t * 2048 / (us * 1e-6) / 1e12
    print(f"sdpa     {hq:2d}/{hkv} q_len {t:6d} keys 2048  bf16   {us:10.1f} us  {tf:7.1f} TFLOP/s  {100*tf/807:5.1f}% of BF16 peak"
          f"  (eager {eager:.1f} us)")
    sys.stdout.flush()
