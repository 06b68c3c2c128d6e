#!/usr/bin/env python3
"""Dense peer for bench_prefill: torch scaled_dot_product_attention on the same GPU with
the same number of keys per query (2048 = 16 pages x 128), bf16, GQA expanded. Prints
us and effective TFLOP/s (4 x 128 x Hq per query-key pair) as bench_prefill does, timed
the way bench_prefill times the KV-outer path (one call in a CUDA graph, median of
replays, each after a 180 MiB L2 flush; peer_timing.py), with the plain-call median as
`eager` (also after a flush). `--flush 0` drops the flushes (the method of sessions 1-26).

Sustained regime (`--energy-ms 2000`, as bench_prefill's energy columns, where NVML is
available; off by default): about 2 s of back-to-back calls, NVML's energy counter read right after a
refresh at both ends: mJ per call, mean power and the time per call with no idle time
between calls (a card at its power cap stays there)."""
import sys

from peer_timing import graph_us_per_call

import torch
import torch.nn.functional as F

import ctypes
import time

COLD_BYTES = 3 * 60 * 1024 * 1024  # bench_util.h kColdBytes
ENERGY_MS = float(sys.argv[sys.argv.index("--energy-ms") + 1]) if "--energy-ms" in sys.argv else 0.0


def nvml_energy():
    """A function returning NVML's total energy counter (mJ) of the current device right
    after its next refresh, or None where NVML is not available."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        bus = getattr(props, "pci_bus_id", None)
        if not isinstance(bus, str):  # torch gives the domain, bus and device numbers
            bus = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    value = ctypes.c_ulonglong()
    if lib.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(value)) != 0:
        return None

    def read_fresh():
        if lib.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(value)) != 0:
            return None
        v0, t0 = value.value, time.time()
        while time.time() - t0 < 2.0:
            if lib.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(value)) != 0:
                return None
            if value.value != v0:
                return value.value
        return None

    return read_fresh


read_energy = nvml_energy() if ENERGY_MS > 0 else None
if ENERGY_MS > 0 and read_energy is None:
    print("energy: NVML's energy counter is not available; no sustained regime")
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
    sustained = ""
    if read_energy is not None:
        calls = max(20, int(ENERGY_MS * 1000 / us))
        torch.cuda.synchronize()
        j0 = read_energy()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(calls):
            F.scaled_dot_product_attention(q, k, v)
        e1.record()
        torch.cuda.synchronize()
        j1 = read_energy()
        if j0 is not None and j1 is not None:
            ms = e0.elapsed_time(e1)
            sustained = (f"  sustained {1000 * ms / calls:.1f} us, {(j1 - j0) / calls:.1f} mJ/call at "
                         f"{(j1 - j0) / ms:.0f} W")
    print(f"sdpa     {hq:2d}/{hkv} q_len {t:6d} keys 2048  bf16   {us:10.1f} us  {tf:7.1f} TFLOP/s  {100*tf/807:5.1f}% of BF16 peak"
          f"  (eager {eager:.1f} us){sustained}")
    sys.stdout.flush()
