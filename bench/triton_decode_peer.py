#!/usr/bin/env python3
"""Side-by-side peer for bench_decode: a plain Triton sparse decode, the kind of kernel
Hopper deployments fall back to for MSA (the official MSA kernels need Blackwell).

BF16 paged K/V [pages, Hkv, 128, 128], top-16 logical pages per (query row, KV head), a
block table, seq_lens; query row b*Q + j of request b sits at p = seq_len - Q + j (spec
D4) and sees the tokens t <= p of its selected pages (spec 3.1). Two kernels, as in the
usual split-KV decode:
  1. one program per (query row, KV head, split): the G query heads of the KV head as
     an M = G tile (tl.dot), an online softmax over the split's pages, partial O and LSE;
  2. one program per (query row, query head): the LSE merge of the splits.
Each query row walks its own pages (drafts of a request do not share page loads), and
invalid top-k entries (-1, beyond the row's local page) are masked, not skipped.

Timing as bench_decode: one CUDA graph of --calls calls, the calls rotating over sets of
block tables and top-k rows that point at disjoint physical pages (together more than
3x the 50 MB L2), median of --reps replays; us per call, and TB/s over the distinct
selected K/V page bytes (16 pages x Hkv x 64 KB per request when the drafts share their
selection, as here).

  python3 bench/triton_decode_peer.py                # the default cases, H200 timings
  python3 bench/triton_decode_peer.py --check-only   # correctness vs a torch reference
  TRITON_INTERPRET=1 python3 bench/triton_decode_peer.py --check-only --device cpu --check-dtype float16
"""
import argparse
import math
import sys

import torch
import triton
import triton.language as tl

from peer_timing import graph_us_per_call

PAGE = 128
D = 128


@triton.jit
def _split_kernel(Q, K, V, BT, TOPK, SEQ, OP, LP,
                  sq_row, sq_head, sk_page, sk_head, sk_tok, sv_page, sv_head, sv_tok,
                  sbt, st_row, st_head, scale,
                  QPR: tl.constexpr, G: tl.constexpr, TOPK_K: tl.constexpr, SPLITS: tl.constexpr,
                  PPS: tl.constexpr, DIM: tl.constexpr, PAGE_T: tl.constexpr):
    row = tl.program_id(0)
    g = tl.program_id(1)
    sp = tl.program_id(2)
    b = row // QPR
    pos = tl.load(SEQ + b) - QPR + row % QPR
    offs_h = tl.arange(0, G)
    offs_d = tl.arange(0, DIM)
    offs_t = tl.arange(0, PAGE_T)
    q = tl.load(Q + row * sq_row + (g * G + offs_h)[:, None] * sq_head + offs_d[None, :])
    m = tl.full([G], float("-inf"), tl.float32)
    l = tl.zeros([G], tl.float32)
    acc = tl.zeros([G, DIM], tl.float32)
    for i in range(PPS):
        slot = sp * PPS + i
        e = tl.load(TOPK + row * st_row + g * st_head + slot, mask=slot < TOPK_K, other=-1)
        valid = (e >= 0) & (e * PAGE_T <= pos)
        e_c = tl.where(valid, e, 0)
        phys = tl.load(BT + b * sbt + e_c).to(tl.int64)
        k = tl.load(K + phys * sk_page + g * sk_head + offs_t[:, None] * sk_tok + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * scale
        vis = valid & (e_c * PAGE_T + offs_t <= pos)
        s = tl.where(vis[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_use)
        p = tl.exp(s - m_use[:, None])
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(V + phys * sv_page + g * sv_head + offs_t[:, None] * sv_tok + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(V.dtype.element_ty), v)
        m = m_new
    has = l > 0
    o = acc / tl.where(has, l, 1.0)[:, None]
    lse = tl.where(has, m + tl.log(tl.where(has, l, 1.0)), float("-inf"))
    heads = g * G + offs_h
    base = (row * tl.num_programs(1) * G + heads) * SPLITS + sp
    tl.store(OP + base[:, None] * DIM + offs_d[None, :], o)
    tl.store(LP + base, lse)


@triton.jit
def _merge_kernel(OP, LP, OUT, SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr, DIM: tl.constexpr):
    pair = tl.program_id(0)  # row * Hq + head
    offs_s = tl.arange(0, SPLITS_P2)
    offs_d = tl.arange(0, DIM)
    ls = tl.load(LP + pair * SPLITS + offs_s, mask=offs_s < SPLITS, other=float("-inf"))
    mx = tl.max(ls, 0)
    mx_use = tl.where(mx == float("-inf"), 0.0, mx)
    w = tl.exp(ls - mx_use)
    o = tl.load(OP + (pair * SPLITS + offs_s)[:, None] * DIM + offs_d[None, :], mask=(offs_s < SPLITS)[:, None],
                other=0.0)
    tot = tl.sum(w, 0)
    res = tl.sum(o * w[:, None], 0) / tl.where(tot > 0, tot, 1.0)
    tl.store(OUT + pair * DIM + offs_d, res.to(OUT.dtype.element_ty))


def sparse_decode(q, k, v, bt, topk, seq, qpr, splits, op, lp, out):
    """q [rows, Hq, 128] bf16; k, v [pages, Hkv, 128, 128] bf16; bt [B, W] i32; topk
    [rows, Hkv, K] i32; seq [B] i32; op f32 [rows, Hq, splits, 128], lp f32 [rows, Hq,
    splits] (workspace); out bf16 [rows, Hq, 128]."""
    rows, hq, _ = q.shape
    hkv, kk = k.shape[1], topk.shape[2]
    g = hq // hkv
    pps = -(-kk // splits)
    _split_kernel[(rows, hkv, splits)](
        q, k, v, bt, topk, seq, op, lp,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        bt.stride(0), topk.stride(0), topk.stride(1), 1.0 / math.sqrt(D),
        QPR=qpr, G=g, TOPK_K=kk, SPLITS=splits, PPS=pps, DIM=D, PAGE_T=PAGE, num_warps=4)
    _merge_kernel[(rows * hq,)](op, lp, out, SPLITS=splits, SPLITS_P2=triton.next_power_of_2(splits), DIM=D,
                                num_warps=4)


def reference(q, k, v, bt, topk, seq, qpr):
    """FP32 torch reference of the same semantics."""
    rows, hq, _ = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    out = torch.zeros(rows, hq, D, dtype=torch.float32)
    for r in range(rows):
        b = r // qpr
        pos = int(seq[b]) - qpr + r % qpr
        for kv in range(hkv):
            pages = sorted({int(e) for e in topk[r, kv].tolist() if 0 <= e and e * PAGE <= pos})
            if not pages:
                continue
            ks = torch.cat([k[int(bt[b, e]), kv].float() for e in pages])
            vs = torch.cat([v[int(bt[b, e]), kv].float() for e in pages])
            tok = torch.cat([torch.arange(e * PAGE, e * PAGE + PAGE) for e in pages])
            s = q[r, kv * g:(kv + 1) * g].float() @ ks.T / math.sqrt(D)
            s[:, tok > pos] = float("-inf")
            out[r, kv * g:(kv + 1) * g] = torch.softmax(s, dim=1) @ vs
    return out


def make_set(batch, qpr, seq_len, hkv, kk, pages_total, first_page, gen, device):
    """Block table over physical pages [first_page, first_page + batch * W) (shuffled), a
    top-k row per (row, KV head) of distinct pages with the local page forced; the drafts
    of a request share one selection (as bench_decode's suites)."""
    w = -(-seq_len // PAGE)
    perm = torch.randperm(batch * w, generator=gen) + first_page
    assert first_page + batch * w <= pages_total
    bt = perm.view(batch, w).to(torch.int32)
    topk = torch.full((batch * qpr, hkv, kk), -1, dtype=torch.int32)
    for b in range(batch):
        local = (seq_len - 1) // PAGE
        for kv in range(hkv):
            hist = torch.randperm(local, generator=gen)[:kk - 1] if local > 0 else torch.empty(0, dtype=torch.long)
            sel = torch.cat([hist, torch.tensor([local])])
            topk[b * qpr:(b + 1) * qpr, kv, :sel.numel()] = sel.to(torch.int32)
    seq = torch.full((batch,), seq_len, dtype=torch.int32)
    return bt.to(device), topk.to(device), seq.to(device)


def check(device, dtype):
    gen = torch.Generator().manual_seed(1)
    ok = True
    for batch, qpr, seq_len, hq, hkv, splits in [(2, 2, 700, 16, 1, 4), (1, 1, 3000, 32, 2, 16), (3, 1, 129, 16, 1, 8)]:
        w = -(-seq_len // PAGE)
        pages = batch * w
        k = torch.randn(pages, hkv, PAGE, D, generator=gen).to(dtype)
        v = torch.randn(pages, hkv, PAGE, D, generator=gen).to(dtype)
        bt, topk, seq = make_set(batch, qpr, seq_len, hkv, 16, pages, 0, gen, "cpu")
        topk[0, 0, 3] = -1  # an invalid entry
        rows = batch * qpr
        q = torch.randn(rows, hq, D, generator=gen).to(dtype)
        ref = reference(q, k, v, bt, topk, seq, qpr)
        dev = [t.to(device) for t in (q, k, v, bt, topk, seq)]
        op = torch.empty(rows, hq, splits, D, dtype=torch.float32, device=device)
        lp = torch.empty(rows, hq, splits, dtype=torch.float32, device=device)
        out = torch.full((rows, hq, D), float("nan"), dtype=dtype, device=device)
        sparse_decode(*dev, qpr, splits, op, lp, out)
        err = (out.float().cpu() - ref).abs().max().item()
        good = err <= 3e-2
        ok &= good
        print(f"check {str(dtype)[6:]} b{batch} q{qpr} seq {seq_len} {hq}/{hkv} splits {splits}: max |err| {err:.3e} "
              f"{'ok' if good else 'FAIL'}")
    return ok


def bench(cases, calls, reps, device):
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}; BF16 K/V; us per call in a CUDA graph of {calls} calls over rotated page sets")
    print("case,hq,hkv,batch,q,splits,us,distinct_mb,tb_s,frac_of_4.2")
    for name, batch, qpr, seq_len, hq, hkv in cases:
        kk = 16
        rows = batch * qpr
        ctas = rows * hkv
        splits = 16 if ctas * 16 <= props.multi_processor_count else max(1, min(8, -(-props.multi_processor_count // ctas)))
        w = -(-seq_len // PAGE)
        set_bytes = batch * hkv * kk * PAGE * D * 2 * 2
        sets = max(1, min(calls, -(-3 * 50 * 2 ** 20 // set_bytes)))
        pages_total = sets * batch * w
        k = torch.randn(pages_total, hkv, PAGE, D, device=device, dtype=torch.bfloat16)
        v = torch.randn(pages_total, hkv, PAGE, D, device=device, dtype=torch.bfloat16)
        gen = torch.Generator().manual_seed(7)
        meta = [make_set(batch, qpr, seq_len, hkv, kk, pages_total, s * batch * w, gen, device) for s in range(sets)]
        q = torch.randn(rows, hq, D, device=device, dtype=torch.bfloat16)
        op = torch.empty(rows, hq, splits, D, dtype=torch.float32, device=device)
        lp = torch.empty(rows, hq, splits, dtype=torch.float32, device=device)
        out = torch.empty(rows, hq, D, dtype=torch.bfloat16, device=device)
        us = graph_us_per_call(lambda c: sparse_decode(q, k, v, *meta[c % sets], qpr, splits, op, lp, out), calls,
                               reps)
        mb = set_bytes / 2 ** 20
        tbs = set_bytes / (us * 1e-6) / 1e12
        print(f"{name},{hq},{hkv},{batch},{qpr},{splits},{us:.3f},{mb:.3f},{tbs:.4f},{tbs / 4.2:.4f}")
        sys.stdout.flush()
        del k, v, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--check-dtype", default="bfloat16", help="bfloat16 (the benchmark's) or float16 "
                    "(Triton's CPU interpreter has no bfloat16 arithmetic)")
    args = ap.parse_args()
    if not check(args.device, getattr(torch, args.check_dtype)):
        return 1
    if args.check_only:
        return 0
    cases = []
    for hq, hkv in ((64, 4), (16, 1)):
        cases += [(f"b1_s4000_q1", 1, 1, 4000, hq, hkv), (f"b1_s32000_q1", 1, 1, 32000, hq, hkv),
                  (f"b4_s4000_q1", 4, 1, 4000, hq, hkv), (f"b1_s4000_q8", 1, 8, 4000, hq, hkv),
                  (f"b32_s10000_q8", 32, 8, 10000, hq, hkv), (f"b128_s10000_q8", 128, 8, 10000, hq, hkv)]
    bench(cases, args.calls, args.reps, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
