"""torch.compile(fullgraph=True) of the example layer (prefill and an MTP decode step)."""

import copy

import torch

import flashmsa
import minimax_m3_attention_layer as ex


def _setup(device):
    B, L, Q, hidden = 2, 200, 2, 256
    layer = ex.MiniMaxM3SparseAttention(hidden, 16, 1, L + 8, torch.bfloat16, device)
    max_pages = 2
    kv, ic = ex.make_caches(B * max_pages, 1, torch.bfloat16, device)
    bt = torch.arange(B * max_pages, dtype=torch.int32, device=device).flip(0).view(B, max_pages).contiguous()
    T = B * L
    x = torch.randn(T, hidden, generator=torch.Generator().manual_seed(1)).bfloat16().to(device)
    req = torch.arange(B, device=device).repeat_interleave(L)
    pos = torch.arange(L, device=device).repeat(B)
    pre = dict(x=x, positions=pos.to(torch.int32), slot_mapping=ex.slots_for(bt, req, pos),
               block_table=bt, cu_seqlens_q=torch.arange(0, T + 1, L, dtype=torch.int32, device=device),
               seq_lens=torch.full((B,), L, dtype=torch.int32, device=device))
    dreq = torch.arange(B, device=device).repeat_interleave(Q)
    dpos = L + torch.arange(Q, device=device).repeat(B)
    dec = dict(x=torch.randn(B * Q, hidden).bfloat16().to(device), positions=dpos.to(torch.int32),
               slot_mapping=ex.slots_for(bt, dreq, dpos))
    return layer, kv, ic, pre, dec, (B, Q, max_pages)


def _run(layer, kv, ic, pre, dec, shape, compiled, device):
    B, Q, max_pages = shape
    prefill, decode = layer.forward_prefill, layer.forward_decode
    if compiled:
        torch._dynamo.reset()
        prefill = torch.compile(prefill, fullgraph=True)
        decode = torch.compile(decode, fullgraph=True)
    y = prefill(kv_cache=kv, index_cache=ic, **pre)
    ind = flashmsa.DecodeIndexerPlan(B, Q, 1, max_pages, device=device)
    ind.update(seq_lens=pre["seq_lens"] + Q, block_table=pre["block_table"])
    w = flashmsa.SparseDecodeWrapper(device)
    w.plan(B, Q, 16, 1, max_pages)
    z = decode(kv_cache=kv, index_cache=ic, indexer_plan=ind, decode=w, **dec)
    return y, z, ind.topk_indices.clone()


def test_compiled_layer_matches_eager(device):
    layer, kv, ic, pre, dec, shape = _setup(device)
    kv2, ic2 = kv.clone(), ic.clone()
    y0, z0, t0 = _run(layer, kv, ic, pre, dec, shape, False, device)
    y1, z1, t1 = _run(layer, kv2, ic2, pre, dec, shape, True, device)
    assert kv.abs().sum() > 0  # the caches were written
    torch.testing.assert_close(kv2.float(), kv.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(ic2.float(), ic.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(y1.float(), y0.float(), atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(z1.float(), z0.float(), atol=5e-2, rtol=5e-2)
    assert (t0 >= 0).any() and torch.equal(t0[:, :, 0], t1[:, :, 0])
