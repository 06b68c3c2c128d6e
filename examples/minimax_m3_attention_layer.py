#!/usr/bin/env python3
"""One MiniMax-M3 sparse attention layer on FlashMSA, random weights.

Prefill of a batch of requests, then several MTP decode steps (Q = 1 + drafts tokens per
request per step), per step: QKV projection (torch matmul) -> fused QK-norm + RoPE +
K/V and index-K cache insert -> indexer top-k -> sparse attention -> output projection.
TP1 = 64 query / 4 KV heads per rank, TP4 = 16 / 1. Timings: CUDA events on the GPU,
perf_counter on the CPU.

    python examples/minimax_m3_attention_layer.py                      # CPU, small
    python examples/minimax_m3_attention_layer.py --device cuda --tp 1 --batch 8 \
        --prefill-len 8192 --mtp 4 --steps 16 --kv-dtype fp8
"""

import argparse
import math
import time

import torch

import flashmsa

PAGE = 128
HEAD_DIM = 128
ROPE_THETA = 5e6


def rope_cos_sin_cache(max_pos: int, device) -> torch.Tensor:
    """bf16 [max_pos, 64]: 32 cos then 32 sin per position (vLLM layout, NeoX rotary 64)."""
    inv_freq = ROPE_THETA ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    freqs = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([freqs.cos(), freqs.sin()], dim=1).to(torch.bfloat16).to(device)


class MiniMaxM3SparseAttention(torch.nn.Module):
    """The attention block of one sparse layer at one TP rank (random weights)."""

    def __init__(self, hidden_size: int, num_q_heads: int, num_kv_heads: int, max_pos: int,
                 kv_dtype=torch.bfloat16, device="cpu", seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.hq, self.hkv, self.hidx = num_q_heads, num_kv_heads, num_kv_heads
        self.kv_dtype = kv_dtype
        width = (self.hq + 2 * self.hkv + self.hidx + 1) * HEAD_DIM

        def rnd(*shape, scale):
            return torch.nn.Parameter((torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).to(device),
                                      requires_grad=False)

        self.w_qkv = rnd(hidden_size, width, scale=hidden_size ** -0.5)
        self.w_o = rnd(self.hq * HEAD_DIM, hidden_size, scale=(self.hq * HEAD_DIM) ** -0.5)
        self.q_norm = rnd(HEAD_DIM, scale=0.1)
        self.k_norm = rnd(HEAD_DIM, scale=0.1)
        self.index_q_norm = rnd(HEAD_DIM, scale=0.1)
        self.index_k_norm = rnd(HEAD_DIM, scale=0.1)
        self.register_buffer("cos_sin_cache", rope_cos_sin_cache(max_pos, device), persistent=False)
        self.fp8 = kv_dtype == torch.float8_e4m3fn
        self.q_scale = 1.0 / 16 if self.fp8 else 1.0  # q8 = E4M3_sat(q / q_scale)
        self.k_scale = self.v_scale = 1.0

    @staticmethod
    def _mm(a, w):
        # CPU bf16 GEMMs are very slow without AMX / AVX512-BF16: multiply in FP32 there.
        if a.device.type == "cpu":
            return (a.float() @ w.float()).to(torch.bfloat16)
        return a @ w

    def _project_insert(self, x, positions, slot_mapping, kv_cache, index_cache):
        T = x.shape[0]
        qkv = self._mm(x, self.w_qkv)
        q = torch.empty(T, self.hq, HEAD_DIM, dtype=self.kv_dtype if self.fp8 else torch.bfloat16,
                        device=x.device)
        index_q = torch.empty(T, self.hidx, HEAD_DIM, dtype=torch.bfloat16, device=x.device)
        flashmsa.fused_qknorm_rope_insert(
            qkv, self.q_norm, self.k_norm, self.index_q_norm, self.index_k_norm,
            self.cos_sin_cache, positions, 1e-6, self.hq, self.hkv, self.hidx,
            slot_mapping, kv_cache, slot_mapping, index_cache, q, index_q,
            q_scale=self.q_scale, k_scale=self.k_scale, v_scale=self.v_scale)
        return q, index_q

    def forward_prefill(self, x, positions, slot_mapping, kv_cache, index_cache, block_table,
                        cu_seqlens_q, seq_lens):
        """x bf16 [T, hidden]; positions / slot_mapping int32 [T]; returns bf16 [T, hidden]."""
        T = x.shape[0]
        q, index_q = self._project_insert(x, positions, slot_mapping, kv_cache, index_cache)
        topk = torch.empty(T, self.hkv, 16, dtype=torch.int32, device=x.device)
        flashmsa.indexer_prefill(index_q, index_cache, block_table, cu_seqlens_q, seq_lens, topk)
        out = torch.empty(T, self.hq, HEAD_DIM, dtype=torch.bfloat16, device=x.device)
        flashmsa.sparse_attention_prefill(q, kv_cache, topk, block_table, cu_seqlens_q, seq_lens, out,
                                          q_scale=self.q_scale, k_scale=self.k_scale,
                                          v_scale=self.v_scale)
        return self._mm(out.view(T, -1), self.w_o)

    def forward_decode(self, x, positions, slot_mapping, kv_cache, index_cache,
                       indexer_plan: flashmsa.DecodeIndexerPlan, decode: flashmsa.SparseDecodeWrapper,
                       out=None):
        """x bf16 [B*Q, hidden]; metadata in ``indexer_plan`` (shared by every layer);
        ``decode`` planned once for the step shape. Returns bf16 [B*Q, hidden]."""
        T = x.shape[0]
        q, index_q = self._project_insert(x, positions, slot_mapping, kv_cache, index_cache)
        topk = indexer_plan.run(index_q, index_cache)
        if out is None:
            out = torch.empty(T, self.hq, HEAD_DIM, dtype=torch.bfloat16, device=x.device)
        decode.run(q, kv_cache, topk, indexer_plan.block_table, indexer_plan.seq_lens, out)
        return self._mm(out.view(T, -1), self.w_o)


def make_caches(num_pages: int, num_kv_heads: int, kv_dtype, device):
    kv = torch.zeros(num_pages, num_kv_heads, PAGE, 2 * HEAD_DIM, dtype=torch.bfloat16, device=device)
    index = torch.zeros(num_pages, PAGE, HEAD_DIM, dtype=torch.bfloat16, device=device)
    return kv.to(kv_dtype), index


def slots_for(block_table: torch.Tensor, req: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """int32 slot = block_table[req, pos // 128] * 128 + pos % 128."""
    pages = block_table[req.long(), (pos // PAGE).long()]
    return (pages * PAGE + pos % PAGE).to(torch.int32)


class Timer:
    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.a.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.b.record()
            self.b.synchronize()
            self.ms = self.a.elapsed_time(self.b)
        else:
            self.ms = (time.perf_counter() - self.t0) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tp", type=int, choices=(1, 4), default=4, help="1: 64/4 heads, 4: 16/1 heads")
    ap.add_argument("--hidden", type=int, default=None, help="hidden size (default 3072 cuda, 512 cpu)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--prefill-len", type=int, default=None, help="tokens per request (default 4096 cuda, 700 cpu)")
    ap.add_argument("--mtp", type=int, default=4, help="queries per request per decode step (1 + drafts)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--kv-dtype", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) the layer steps")
    args = ap.parse_args(argv)
    # Bad values end in argparse's usage error (exit 2) naming the option, not in a traceback.
    for name in ("hidden", "batch", "prefill_len", "steps"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} {v}: expected a positive integer")
    if not 1 <= args.mtp <= 16:
        ap.error(f"--mtp {args.mtp}: expected 1..16 queries per request (the indexer decode plan's range)")
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        ap.error(f"--device {args.device!r}: {e}")
    if device.type not in ("cpu", "cuda"):
        ap.error(f"--device {args.device!r}: expected cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: no CUDA device is visible to torch; use --device cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        ap.error(f"--device {args.device}: expected an index below {torch.cuda.device_count()} (visible CUDA devices)")

    cuda = device.type == "cuda"
    hidden = args.hidden if args.hidden is not None else (3072 if cuda else 512)
    prefill_len = args.prefill_len if args.prefill_len is not None else (4096 if cuda else 700)
    hq, hkv = (64, 4) if args.tp == 1 else (16, 1)
    kv_dtype = torch.float8_e4m3fn if args.kv_dtype == "fp8" else torch.bfloat16
    B, Q, steps = args.batch, args.mtp, args.steps
    max_len = prefill_len + Q * steps
    max_pages = math.ceil(max_len / PAGE)
    num_pages = B * max_pages

    torch.manual_seed(0)
    layer = MiniMaxM3SparseAttention(hidden, hq, hkv, max_len, kv_dtype, device)
    kv_cache, index_cache = make_caches(num_pages, hkv, kv_dtype, device)
    block_table = torch.randperm(num_pages, dtype=torch.int32).view(B, max_pages).to(device)

    prefill = layer.forward_prefill
    decode_step = layer.forward_decode
    if args.compile:
        prefill = torch.compile(prefill, fullgraph=True)
        decode_step = torch.compile(decode_step, fullgraph=True)

    # Prefill: every request prefill_len tokens.
    T = B * prefill_len
    x = torch.randn(T, hidden, dtype=torch.bfloat16, device=device)
    req = torch.arange(B, device=device).repeat_interleave(prefill_len)
    pos = torch.arange(prefill_len, device=device).repeat(B)
    slots = slots_for(block_table, req, pos)
    cu = torch.arange(0, T + 1, prefill_len, dtype=torch.int32, device=device)
    seq_lens = torch.full((B,), prefill_len, dtype=torch.int32, device=device)
    pre_args = (x, pos.to(torch.int32), slots, kv_cache, index_cache, block_table, cu, seq_lens)
    if cuda or args.compile:
        prefill(*pre_args)  # warm-up (lazy CUDA init, compilation); rewrites the same slots
    with Timer(device) as t:
        y = prefill(*pre_args)
    print(f"prefill: {B} x {prefill_len} tokens, heads {hq}/{hkv}, kv {args.kv_dtype}, "
          f"{device.type}: {t.ms:.2f} ms (incl. projections), out {tuple(y.shape)}")

    # Decode: one plan serves every layer and step; metadata updated in place.
    ind = flashmsa.DecodeIndexerPlan(B, Q, hkv, max_pages, device=device)
    ind.update(seq_lens=seq_lens, block_table=block_table)
    dec = flashmsa.SparseDecodeWrapper(device)
    dec.plan(B, Q, hq, hkv, max_pages, kv_dtype=kv_dtype, q_scale=layer.q_scale)
    req = torch.arange(B, device=device).repeat_interleave(Q)
    for step in range(steps):
        ind.advance()  # lengths include the Q new tokens
        pos = (ind.seq_lens.repeat_interleave(Q) - Q + torch.arange(Q, device=device).repeat(B))
        slots = slots_for(block_table, req, pos)
        x = torch.randn(B * Q, hidden, dtype=torch.bfloat16, device=device)
        with Timer(device) as t:
            y = decode_step(x, pos.to(torch.int32), slots, kv_cache, index_cache, ind, dec)
        print(f"decode step {step}: B {B} x Q {Q}, context {prefill_len + (step + 1) * Q}: {t.ms:.3f} ms, "
              f"finite {bool(torch.isfinite(y.float()).all())}")
    return y


if __name__ == "__main__":
    main()
