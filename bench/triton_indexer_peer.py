#!/usr/bin/env python3
"""Side-by-side peer for bench_indexer's decode suites: a plain Triton page scorer plus
torch.topk, the shape of a Hopper fallback for the MSA lightning indexer.

Index q [rows, H, 128] and a single index-K cache [pages, 128, 128] (spec 2.2, D2), a
block table and seq_lens; query row b*Q + j sits at p = seq_len - Q + j (D4). Kernel:
one program per (request, chunk of pages); the request's Q x H score rows are one tile
(tl.dot against each page's 128 keys, E4M3 operands as tl.float8e4nv on the GPU, so the
tensor cores' FP8 MMA), the max over the page's tokens goes to a score buffer; pages at
or beyond a row's local page get -inf. Then torch.topk(15) over the history pages and
the local page appended (D1 without the exact tie order; enough for timing).

Timing as bench_indexer: one CUDA graph of --calls calls rotating over block tables that
point at disjoint index-K pages (more than 3x L2 together), median of --reps replays; us
per call and TB/s of index-K bytes (128 B per token of every history page).

  python3 bench/triton_indexer_peer.py                # the default cases, H200 timings
  TRITON_INTERPRET=1 python3 bench/triton_indexer_peer.py --check-only --device cpu
"""
import argparse
import sys

import torch
import triton
import triton.language as tl

from peer_timing import graph_us_per_call

PAGE = 128
D = 128


@triton.jit
def _score_kernel(Q, K, BT, SEQ, WS, sq_row, sq_head, sk_page, sk_tok, sbt, sws_row, sws_head,
                  QPR: tl.constexpr, H: tl.constexpr, ROWS_P2: tl.constexpr, CHUNK: tl.constexpr,
                  DIM: tl.constexpr, PAGE_T: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1)
    seq = tl.load(SEQ + b)
    offs_r = tl.arange(0, ROWS_P2)  # score row = draft * H + head
    draft = offs_r // H
    head = offs_r % H
    row_ok = offs_r < QPR * H
    pos = seq - QPR + draft
    offs_d = tl.arange(0, DIM)
    offs_t = tl.arange(0, PAGE_T)
    q = tl.load(Q + (b * QPR + draft)[:, None] * sq_row + head[:, None] * sq_head + offs_d[None, :],
                mask=row_ok[:, None], other=0.0)
    last_local = (seq - 1) // PAGE_T
    for i in range(CHUNK):
        e = c * CHUNK + i
        if e < last_local:
            phys = tl.load(BT + b * sbt + e).to(tl.int64)
            k = tl.load(K + phys * sk_page + offs_t[:, None] * sk_tok + offs_d[None, :])
            s = tl.dot(q, tl.trans(k))
            mx = tl.max(s, 1)
            mx = tl.where(e < pos // PAGE_T, mx, float("-inf"))
            tl.store(WS + (b * QPR + draft) * sws_row + head * sws_head + e, mx, mask=row_ok)


def index_decode(q, k, bt, seq, qpr, ws, chunk):
    """q [rows, H, 128]; k [pages, 128, 128] (same dtype); bt [B, W] i32; seq [B] i32;
    ws f32 [rows, H, W] (scores; -inf where not a history page of the row)."""
    rows, h, _ = q.shape
    batch, w = bt.shape
    ws.fill_(float("-inf"))
    _score_kernel[(batch, -(-w // chunk))](
        q, k, bt, seq, ws, q.stride(0), q.stride(1), k.stride(0), k.stride(1), bt.stride(0), ws.stride(0),
        ws.stride(1), QPR=qpr, H=h, ROWS_P2=max(16, triton.next_power_of_2(qpr * h)), CHUNK=chunk, DIM=D,
        PAGE_T=PAGE, num_warps=4)
    top = torch.topk(ws, min(15, w), dim=2).indices.to(torch.int32)
    local = ((seq.repeat_interleave(qpr) - qpr + torch.arange(qpr, device=seq.device).repeat(batch)) // PAGE)
    return torch.cat([top, local.to(torch.int32).view(rows, 1, 1).expand(rows, h, 1)], dim=2)


def check(device):
    gen = torch.Generator().manual_seed(3)
    ok = True
    for batch, qpr, h, seq_len in [(2, 8, 4, 3000), (3, 1, 4, 700), (1, 16, 4, 5000)]:
        w = -(-seq_len // PAGE)
        pages = batch * w
        dt = torch.float16
        k = (torch.randn(pages, PAGE, D, generator=gen) * 0.5).to(dt)
        q = (torch.randn(batch * qpr, h, D, generator=gen) * 0.5).to(dt)
        bt = torch.randperm(pages, generator=gen).view(batch, w).to(torch.int32)
        seq = torch.full((batch,), seq_len, dtype=torch.int32)
        ws = torch.empty(batch * qpr, h, w, dtype=torch.float32)
        dev = [t.to(device) for t in (q, k, bt, seq, ws)]
        index_decode(dev[0], dev[1], dev[2], dev[3], qpr, dev[4], 8)
        got = dev[4].cpu()
        ref = torch.full_like(ws, float("-inf"))
        for r in range(batch * qpr):
            b = r // qpr
            pos = seq_len - qpr + r % qpr
            for e in range(pos // PAGE):
                ref[r, :, e] = (q[r].float() @ k[int(bt[b, e])].float().T).max(dim=1).values
        fin = torch.isfinite(ref)
        same_inf = torch.equal(torch.isfinite(got), fin)
        err = (got[fin] - ref[fin]).abs().max().item() if fin.any() else 0.0
        mag = ref[fin].abs().max().item() if fin.any() else 1.0
        good = same_inf and err <= 2e-3 * mag
        ok &= good
        print(f"check b{batch} q{qpr} h{h} seq {seq_len}: max |err| {err:.3e} (row max {mag:.2f}) "
              f"{'ok' if good else 'FAIL'}")
    return ok


def bench(cases, calls, reps, device):
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}; E4M3 index q and index-K (tl.float8e4nv); us per call (scores + torch.topk) in a "
          f"CUDA graph of {calls} calls over rotated page sets")
    print("case,heads,batch,q,us,index_k_mb,tb_s,frac_of_4.2")
    for name, batch, qpr, seq_len, h in cases:
        w = -(-seq_len // PAGE)
        set_bytes = batch * (w - 1) * PAGE * D
        sets = max(1, min(calls, -(-3 * 50 * 2 ** 20 // set_bytes)))
        pages = sets * batch * w
        k = torch.randn(pages, PAGE, D, device=device).to(torch.float8_e4m3fn)
        q = torch.randn(batch * qpr, h, D, device=device).to(torch.float8_e4m3fn)
        gen = torch.Generator().manual_seed(5)
        bts = [(torch.randperm(batch * w, generator=gen) + s * batch * w).view(batch, w).to(torch.int32).to(device)
               for s in range(sets)]
        seq = torch.full((batch,), seq_len, dtype=torch.int32, device=device)
        ws = torch.empty(batch * qpr, h, w, dtype=torch.float32, device=device)
        chunk = max(4, -(-w * batch // (4 * props.multi_processor_count)))
        us = graph_us_per_call(lambda c: index_decode(q, k, bts[c % sets], seq, qpr, ws, chunk), calls, reps)
        tbs = set_bytes / (us * 1e-6) / 1e12
        print(f"{name},{h},{batch},{qpr},{us:.3f},{set_bytes / 2 ** 20:.3f},{tbs:.4f},{tbs / 4.2:.4f}")
        sys.stdout.flush()
        del k, bts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    if not check(args.device):
        return 1
    if args.check_only:
        return 0
    cases = [(f"b{b}_s{s}_q8", b, 8, s, 4) for s in (10000, 50000, 100000) for b in (32, 64, 128)]
    cases += [("b1_s4000_q8", 1, 8, 4000, 4), ("b1_s32000_q8", 1, 8, 32000, 4)]
    bench(cases, args.calls, args.reps, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
