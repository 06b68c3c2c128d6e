"""Timing shared by the Python peers (triton_decode_peer.py, triton_indexer_peer.py), the
method of bench_decode / bench_indexer: warm-up calls, one CUDA graph of `calls` calls
(call(c) issues call number c, which picks its rotated input set), 3 warm-up replays,
median of `reps` timed replays (CUDA events), in microseconds per call."""
import torch


def graph_us_per_call(call, calls, reps, warmup=3):
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
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1000 / calls)
    return sorted(times)[len(times) // 2]
