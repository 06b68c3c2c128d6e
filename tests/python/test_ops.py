"""Every op through the binding against small pure-torch references, on each device."""

import math

import pytest
import torch

import flashmsa
from refs import (PAGE, Batch, cosine, dequant_kv, dequant_nvfp4_kv, ref_attention,
                  ref_fused_rows, ref_page_scores, ref_select)


def test_cache_insert_bf16_fp8(device):
    T, hkv, pages = 37, 2, 3
    k = torch.randn(T, hkv, 128).bfloat16().to(device)
    v = torch.randn(T, hkv, 128).bfloat16().to(device)
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32)
    slots[5] = -1
    slots = slots.to(device)
    for dtype, ks, vs in ((torch.bfloat16, 1.0, 1.0), (torch.float8_e4m3fn, 0.5, 2.0)):
        kv = torch.zeros(pages, hkv, PAGE, 256, dtype=dtype, device=device)
        flashmsa.cache_insert(k, v, slots.long() if ks != 1.0 else slots, kv, ks, vs)  # int64 slots too
        flat = kv.view(pages, hkv, PAGE, 256).permute(0, 2, 1, 3).reshape(pages * PAGE, hkv, 256)
        keep = slots >= 0
        got = flat[slots[keep].long()]
        exp_k = (k[keep].float() / ks).to(dtype)
        exp_v = (v[keep].float() / vs).to(dtype)
        assert torch.equal(got[..., :128].view(torch.uint8), exp_k.view(torch.uint8))
        assert torch.equal(got[..., 128:].view(torch.uint8), exp_v.view(torch.uint8))


def test_cache_insert_nvfp4_and_nvfp4_to_fp8(device):
    T, hkv, pages = 20, 2, 2
    k = torch.randn(T, hkv, 128).bfloat16().to(device)
    v = torch.randn(T, hkv, 128).bfloat16().to(device)
    slots = torch.arange(T, dtype=torch.int32, device=device) + 100
    kv = torch.zeros(pages, 2 * hkv, PAGE, 72, dtype=torch.uint8, device=device)
    flashmsa.cache_insert(k, v, slots, kv)
    # K side of every page: data [Hkv, 128, 64] then scales [Hkv, 128, 8].
    flat = kv.view(pages, 2, hkv * PAGE * 72)
    nd = hkv * PAGE * 64
    for side, ref in ((0, k), (1, v)):
        data = flat[:, side, :nd].reshape(pages, hkv, PAGE, 64).permute(0, 2, 1, 3).reshape(-1, hkv, 64)
        scale = flat[:, side, nd:].reshape(pages, hkv, PAGE, 8).permute(0, 2, 1, 3).reshape(-1, hkv, 8)
        rows = slots.long()
        packed = data[rows].reshape(-1, 64).contiguous()
        sc = scale[rows].reshape(-1, 8).contiguous().view(torch.float8_e4m3fn)
        out = torch.empty(packed.shape[0], 128, dtype=torch.float8_e4m3fn, device=device)
        flashmsa.nvfp4_to_fp8(packed, sc, out)
        assert cosine(out.float(), ref.reshape(-1, 128).float()) > 0.98


def test_index_cache_insert(device):
    T, pages = 30, 2
    ik = torch.randn(T, 128).bfloat16().to(device)
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32).to(device)
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        cache = torch.zeros(pages, PAGE, 128, dtype=dtype, device=device)
        flashmsa.index_cache_insert(ik, slots, cache)
        got = cache.view(-1, 128)[slots.long()]
        assert torch.equal(got.view(torch.uint8), ik.float().to(dtype).view(torch.uint8))
    codes = torch.zeros(pages, PAGE, 64, dtype=torch.uint8, device=device)
    scales = torch.zeros(pages, PAGE, 8, dtype=torch.float8_e4m3fn, device=device)
    flashmsa.index_cache_insert(ik, slots, codes, scales, 1.0)
    out = torch.empty(T, 128, dtype=torch.float8_e4m3fn, device=device)
    flashmsa.nvfp4_to_fp8(codes.view(-1, 64)[slots.long()].contiguous(),
                          scales.view(-1, 8)[slots.long()].contiguous(), out)
    assert cosine(out.float(), ik.float()) > 0.98


def test_quantize_query_e4m3(device):
    q = torch.randn(9, 4, 128).bfloat16().to(device)
    out = torch.empty(9, 4, 128, dtype=torch.float8_e4m3fn, device=device)
    flashmsa.quantize_query_e4m3(q, 0.25, out)
    assert torch.equal(out.view(torch.uint8), (q.float() / 0.25).to(torch.float8_e4m3fn).view(torch.uint8))


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_fused_qknorm_rope_insert(device, kv_dtype):
    hq, hkv, T, pages = 8, 2, 19, 2
    width = (hq + 2 * hkv + hkv + 1) * 128
    qkv = torch.randn(T, width).bfloat16().to(device)
    ws = [(torch.randn(128) * 0.1).bfloat16().to(device) for _ in range(4)]
    max_pos = 300
    ang = torch.arange(max_pos)[:, None].double() * (5e6 ** (-torch.arange(0, 64, 2).double() / 64))
    cos_sin = torch.cat([ang.cos(), ang.sin()], 1).bfloat16().to(device)
    positions = torch.randint(0, max_pos, (T,), dtype=torch.int32).to(device)
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32).to(device)
    islots = torch.randperm(pages * PAGE)[:T].to(torch.int32).to(device)
    kv = torch.zeros(pages, hkv, PAGE, 256, dtype=kv_dtype, device=device)
    icache = torch.zeros(pages, PAGE, 128, dtype=torch.bfloat16, device=device)
    q_dtype = torch.bfloat16 if kv_dtype == torch.bfloat16 else torch.float8_e4m3fn
    q_scale = 1.0 if q_dtype == torch.bfloat16 else 0.5
    q_out = torch.empty(T, hq, 128, dtype=q_dtype, device=device)
    iq_out = torch.empty(T, hkv, 128, dtype=torch.bfloat16, device=device)
    flashmsa.fused_qknorm_rope_insert(qkv, *ws, cos_sin, positions, 1e-6, hq, hkv, hkv, slots, kv,
                                      islots, icache, q_out, iq_out, q_scale=q_scale)
    rq, rk, riq, rik, rv = ref_fused_rows(qkv, ws, cos_sin, positions, 1e-6, hq, hkv, hkv)
    tol = dict(atol=2e-2, rtol=2e-2) if q_dtype == torch.bfloat16 else dict(atol=0.1, rtol=0.07)
    torch.testing.assert_close(q_out.float().cpu().double() * q_scale, rq, **tol)
    torch.testing.assert_close(iq_out.double().cpu(), riq, atol=2e-2, rtol=2e-2)
    flat = kv.permute(0, 2, 1, 3).reshape(-1, hkv, 256)[slots.long()].cpu()
    torch.testing.assert_close(flat[..., :128].double(), rk, **tol)
    assert torch.equal(flat[..., 128:].view(torch.uint8), rv.bfloat16().to(kv_dtype).view(torch.uint8))
    torch.testing.assert_close(icache.view(-1, 128)[islots.long()].double().cpu(), rik, atol=2e-2, rtol=2e-2)


def _check_indexer(batch, topk, scores):
    T, H = batch.T, batch.hkv
    width = scores.shape[2]
    ref = ref_page_scores(batch.index_q, batch.index_cache, batch.block_table, batch.req, batch.pos, width)
    got = scores.double().cpu()
    finite = torch.isfinite(ref)
    assert torch.equal(finite, torch.isfinite(got))
    torch.testing.assert_close(got[finite], ref[finite], rtol=2e-4, atol=1e-3)
    tk = topk.cpu()
    for r in range(T):
        L = int(batch.pos[r]) // PAGE if int(batch.pos[r]) >= 0 else -1
        for h in range(H):
            assert tk[r, h].tolist() == ref_select(got[r, h], L, topk.shape[2]), (r, h)


@pytest.mark.parametrize("idx_dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_indexer_prefill(device, idx_dtype):
    batch = Batch(q_lens=[40, 1, 129], seq_lens=[3000, 900, 2600], hkv=2, hq=4, device=device)
    batch.index_q, batch.index_cache = batch.index_q.to(idx_dtype), batch.index_cache.to(idx_dtype)
    W = batch.max_pages
    topk = torch.empty(batch.hkv, batch.T, 16, dtype=torch.int32, device=device).transpose(0, 1)  # head-major
    scores = torch.empty(batch.T, batch.hkv, W, dtype=torch.float32, device=device)
    flashmsa.indexer_prefill(batch.index_q, batch.index_cache, batch.block_table, batch.cu_seqlens_q,
                             batch.seq_lens, topk, scores)
    _check_indexer(batch, topk, scores)


def test_indexer_decode(device):
    Q = 3
    batch = Batch(q_lens=[Q] * 3, seq_lens=[2500, 0, 700], hkv=1, hq=16, device=device)
    topk = torch.empty(batch.T, 1, 16, dtype=torch.int32, device=device)
    scores = torch.empty(batch.T, 1, batch.max_pages, dtype=torch.float32, device=device)
    flashmsa.indexer_decode(batch.index_q, batch.index_cache, batch.block_table, batch.seq_lens, Q,
                            topk, scores)
    _check_indexer(batch, topk, scores)
    assert (topk[Q:2 * Q] == -1).all()  # padding request (seq_len 0)
    plan = flashmsa.DecodeIndexerPlan(3, Q, 1, batch.max_pages, device=device)
    plan.update(seq_lens=batch.seq_lens, block_table=batch.block_table)
    assert torch.equal(plan.run(batch.index_q, batch.index_cache), topk)


def _random_topk(batch, K=16):
    """Random (partly invalid, duplicated) page lists [T, Hkv, K] plus the local page."""
    t = torch.randint(-1, batch.max_pages + 1, (batch.T, batch.hkv, K), generator=batch.g, dtype=torch.int32)
    t[:, :, 0] = (batch.pos // PAGE).clamp(min=-1).to(torch.int32)[:, None]
    return t.to(batch.device)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.uint8])
def test_sparse_attention_prefill(device, kv_dtype):
    batch = Batch(q_lens=[70, 130], seq_lens=[1000, 400], hkv=2, hq=8,
                  kv_dtype=torch.bfloat16 if kv_dtype == torch.uint8 else kv_dtype, device=device)
    if kv_dtype == torch.uint8:  # NVFP4 head-slot pages written by cache_insert (global scales 0.5 / 2)
        src = batch.kv_cache.float()
        k = src[..., :128].permute(0, 2, 1, 3).reshape(-1, 2, 128).bfloat16()
        v = src[..., 128:].permute(0, 2, 1, 3).reshape(-1, 2, 128).bfloat16()
        batch.kv_cache = torch.zeros(batch.num_pages, 4, PAGE, 72, dtype=torch.uint8, device=device)
        flashmsa.cache_insert(k, v, torch.arange(k.shape[0], dtype=torch.int32, device=device),
                              batch.kv_cache, 0.5, 2.0)
    topk = _random_topk(batch)
    q, q_scale, ks, vs = batch.q, 1.0, 1.0, 1.0
    if kv_dtype != torch.bfloat16:
        q_scale, ks, vs = 0.25, 0.5, 2.0
        q = torch.empty(batch.q.shape, dtype=torch.float8_e4m3fn, device=device)
        flashmsa.quantize_query_e4m3(batch.q, q_scale, q)
    out = torch.empty(batch.T, batch.hq, 128, dtype=torch.bfloat16, device=device)
    lse = torch.empty(batch.T, batch.hq, dtype=torch.float32, device=device)
    flashmsa.sparse_attention_prefill(q, batch.kv_cache, topk, batch.block_table, batch.cu_seqlens_q,
                                      batch.seq_lens, out, lse, q_scale=q_scale, k_scale=ks, v_scale=vs)
    K, V = dequant_nvfp4_kv(batch.kv_cache, ks, vs) if kv_dtype == torch.uint8 else dequant_kv(batch.kv_cache, ks, vs)
    c = flashmsa.DEFAULT_SOFTMAX_SCALE
    ro, rl = ref_attention(q.float().double().cpu() * q_scale, K, V, topk, batch.block_table,
                           batch.seq_lens, batch.req, batch.pos, c)
    bf16 = kv_dtype == torch.bfloat16
    torch.testing.assert_close(out.double().cpu(), ro, atol=3e-2 if bf16 else 8e-2, rtol=3e-2 if bf16 else 8e-2)
    assert cosine(out, ro) > (0.9999 if bf16 else 0.995)
    torch.testing.assert_close(lse.double().cpu(), rl, atol=1e-3, rtol=0)


@pytest.mark.parametrize("Q", [1, 4])
def test_sparse_attention_decode(device, Q):
    batch = Batch(q_lens=[Q] * 3, seq_lens=[1500, 0, 300], hkv=1, hq=16, device=device)
    topk = _random_topk(batch)
    out = torch.empty(batch.T, 16, 128, dtype=torch.bfloat16, device=device)
    lse = torch.empty(batch.T, 16, dtype=torch.float32, device=device)
    w = flashmsa.SparseDecodeWrapper(device)
    w.plan(3, Q, 16, 1, batch.max_pages)
    w.run(batch.q, batch.kv_cache, topk, batch.block_table, batch.seq_lens, out, lse)
    K, V = dequant_kv(batch.kv_cache)
    ro, rl = ref_attention(batch.q.double().cpu(), K, V, topk, batch.block_table, batch.seq_lens,
                           batch.req, batch.pos, flashmsa.DEFAULT_SOFTMAX_SCALE)
    torch.testing.assert_close(out.double().cpu(), ro, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(lse.double().cpu(), rl, atol=1e-3, rtol=0)
    assert (out[Q:2 * Q] == 0).all() and torch.isneginf(lse[Q:2 * Q]).all()
    # plan=0: the per-device plan cache gives the same bytes.
    out2 = torch.empty_like(out)
    flashmsa.sparse_attention_decode(batch.q, batch.kv_cache, topk, batch.block_table, batch.seq_lens, Q, out2)
    assert torch.equal(out, out2)


def test_prefill_wrapper_matches_ops(device):
    batch = Batch(q_lens=[50, 200], seq_lens=[600, 2200], hkv=4, hq=64, device=device)
    w = flashmsa.SparsePrefillWrapper()
    w.plan(batch.cu_seqlens_q, batch.seq_lens, batch.block_table)
    topk = w.select(batch.index_q, batch.index_cache)
    out, lse = w.run(batch.q, batch.kv_cache, topk, return_lse=True)
    topk2 = torch.empty_like(topk)
    flashmsa.indexer_prefill(batch.index_q, batch.index_cache, batch.block_table, batch.cu_seqlens_q,
                             batch.seq_lens, topk2)
    out2 = torch.empty_like(out)
    flashmsa.sparse_attention_prefill(batch.q, batch.kv_cache, topk2, batch.block_table,
                                      batch.cu_seqlens_q, batch.seq_lens, out2)
    assert torch.equal(topk, topk2) and torch.equal(out, out2)
    assert lse.shape == (batch.T, 64)
