"""torch.library.opcheck on every tensor op: schema mutation annotations match what the
kernels write, fake implementations agree, and the ops trace under AOT dispatch."""

import pytest
import torch

import flashmsa
from refs import PAGE, Batch

F = torch.ops.flashmsa
# test_autograd_registration does not apply: the ops have no autograd formula (inference only).
UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _cases():
    b = Batch(q_lens=[5, 3], seq_lens=[300, 140], hkv=1, hq=16)
    d = Batch(q_lens=[2, 2], seq_lens=[300, 0], hkv=1, hq=16)
    T = b.T
    k = torch.randn(T, 1, 128).bfloat16()
    slots = torch.arange(T, dtype=torch.int32) + 7
    topk = torch.zeros(T, 1, 16, dtype=torch.int32)
    hq, hkv = 16, 1
    qkv = torch.randn(T, (hq + 3 * hkv + 1) * 128).bfloat16()
    w = torch.zeros(128).bfloat16()
    cs = torch.randn(400, 64).bfloat16()
    return {
        "cache_insert": (F.cache_insert, (k, k, slots, b.kv_cache.clone())),
        "index_cache_insert": (F.index_cache_insert, (k[:, 0], slots, b.index_cache.clone())),
        "quantize_query_e4m3": (F.quantize_query_e4m3, (b.q, 0.5, torch.empty(T, hq, 128, dtype=torch.float8_e4m3fn))),
        "nvfp4_to_fp8": (F.nvfp4_to_fp8, (torch.randint(0, 255, (4, 64), dtype=torch.uint8),
                                          torch.full((4, 8), 56, dtype=torch.uint8),
                                          torch.empty(4, 128, dtype=torch.float8_e4m3fn))),
        "fused_qknorm_rope_insert": (F.fused_qknorm_rope_insert, (
            qkv, w, w, w, w, cs, slots, 1e-6, hq, hkv, hkv, slots, b.kv_cache.clone(), slots,
            b.index_cache.clone(), torch.empty(T, hq, 128).bfloat16(), torch.empty(T, hkv, 128).bfloat16())),
        "indexer_prefill": (F.indexer_prefill, (b.index_q, b.index_cache, None, 1.0, b.block_table, b.cu_seqlens_q,
                                                b.seq_lens, topk.clone(), torch.empty(T, 1, b.max_pages))),
        "indexer_decode": (F.indexer_decode, (d.index_q, d.index_cache, None, 1.0, d.block_table, d.seq_lens, 2,
                                              torch.empty(4, 1, 16, dtype=torch.int32))),
        "topk_select": (F.topk_select, (torch.randn(6, 40), torch.tensor([39, 20, 3, 0, -1, 17], dtype=torch.int32),
                                        torch.empty(6, 16, dtype=torch.int32))),
        "sparse_attention_prefill": (F.sparse_attention_prefill, (
            b.q, b.kv_cache, topk, b.block_table, b.cu_seqlens_q, b.seq_lens, torch.empty(T, hq, 128).bfloat16(),
            torch.empty(T, hq))),
        "sparse_attention_decode": (F.sparse_attention_decode, (
            d.q, d.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32), d.block_table, d.seq_lens, 2,
            torch.empty(4, hq, 128).bfloat16())),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_opcheck(name):
    op, args = _cases()[name]
    utils = UTILS
    if name in ("quantize_query_e4m3", "nvfp4_to_fp8"):
        # opcheck's schema test does arithmetic on the outputs, not implemented for float8.
        utils = ("test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(op, args, test_utils=utils)
