#!/usr/bin/env python3
"""Prints the decode suites' per-request KV lengths computed with PyTorch's CPU generator,
exactly as decode-workloads.json's length_rule describes, as JSON {case name: [lengths]}.
Used to check tools/workloads.cpp (decode_seq_lens) on a machine that has torch."""
import json
import sys

import torch

data = json.load(open(sys.argv[1]))
out = {}
for suite in ("full", "low_latency"):
    for case in data["suites"][suite]["cases"]:
        b, n = case["batch_size"], case["nominal_seq_len"]
        g = torch.Generator().manual_seed(case["length_rng_seed"])
        pairs = b // 2
        dmin, dmax = max(1, n // 20), max(max(1, n // 20), n // 4)
        deltas = torch.randint(dmin, dmax + 1, (pairs,), generator=g).tolist()
        vals = [n - d for d in deltas] + [n + d for d in deltas] + ([n] if b % 2 else [])
        perm = torch.randperm(b, generator=g).tolist()
        out[case["name"]] = [vals[i] for i in perm]
json.dump(out, sys.stdout)
