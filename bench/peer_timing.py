"""Timing shared by the Python peers (triton_decode_peer.py, triton_indexer_peer.py), the
method of bench_decode / bench_indexer: warm-up calls, one CUDA graph of `calls` calls
(call(c) issues call number c, which picks its rotated input set), 3 warm-up replays,
median of `reps` timed replays (CUDA events), in microseconds per call.

flush_bytes > 0 (sdpa_peer.py, as bench_prefill): each timed replay follows a fill of
that many bytes, which evicts L2 and keeps the GPU busy while the replay is launched, so
the host's launch latency stays out of the time."""
import torch


def graph_us_per_call(call, calls, reps, warmup=3, flush_bytes=0):
    for c in range(warmup):  # compile and warm up
        call(c)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        for c in range(calls):
            call(c)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes > 0 else None
    times = []
    for r in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if flush is not None:
            flush.fill_(r & 0xFF)
        e0.record()
        graph.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1000 / calls)
    return sorted(times)[len(times) // 2]
