"""One python function per FlashMSA op (``torch.ops.flashmsa.*``).

Conventions (spec D1-D10): head dim 128, page 128 tokens, top-k <= 16 logical page ids
(int32, -1 padded), 1..8 KV heads, GQA group Hq/Hkv in {1, 2, 4, 8, 16}. All tensors of
one call live on one device: CPU tensors run the CPU backend (synchronously), CUDA
tensors run the SM90 kernels on torch's current stream (asynchronously, no host sync,
no allocation). Metadata tensors (slots, positions, seq_lens, cu_seqlens, block tables,
top-k) are int32.

Caches (vLLM layouts, written in place, no copies):

* ``kv_cache``: bfloat16 ``[pages, Hkv, 128, 256]`` (K = columns 0..127, V = 128..255),
  float8_e4m3fn ``[pages, Hkv, 128, 256]`` with per-tensor ``k_scale`` / ``v_scale``, or
  uint8 ``[pages, 2*Hkv, 128, 72]`` NVFP4 head-slot pages (per page: K data
  ``[Hkv,128,64]``, K scales ``[Hkv,128,8]``, then V), optionally with a 4x4-swizzled
  scale plane per side (``k_swizzled`` / ``v_swizzled``). The format follows the dtype.
* ``index_cache``: bfloat16 or float8_e4m3fn ``[pages, 128, 128]``, or uint8
  ``[pages, 128, 64]`` NVFP4 codes with ``index_block_scale`` float8_e4m3fn
  ``[pages, 128, 8]`` and ``index_global_scale``.

Errors: a flashmsa Status becomes ``ValueError`` (invalid argument) or ``RuntimeError``
(unsupported, e.g. CUDA tensors in a CPU-only build); the message names the op, the
argument, what was expected and what was given, e.g.
``flashmsa::sparse_attention_prefill: argument 'q': expected dtype bf16 or e4m3, got f32``.
On CUDA the *contents* of metadata tensors are not validated (that would need a sync):
out-of-range entries are skipped, never read or written out of bounds.
"""

from typing import Optional

import torch

KV_FORMAT_BF16 = 0
KV_FORMAT_FP8 = 1
KV_FORMAT_NVFP4 = 2

_F = torch.ops.flashmsa


def _i32(t: torch.Tensor) -> torch.Tensor:
    """vLLM's int64 slot mappings / positions as int32 (a copy); other tensors unchanged."""
    return t.to(torch.int32) if t.dtype == torch.int64 else t


def kv_format_of(kv_cache: torch.Tensor) -> int:
    """KV_FORMAT_* of a kv_cache tensor: bfloat16 -> bf16, float8_e4m3fn -> fp8, uint8 -> nvfp4."""
    if kv_cache.dtype == torch.float8_e4m3fn:
        return KV_FORMAT_FP8
    if kv_cache.dtype == torch.uint8:
        return KV_FORMAT_NVFP4
    if kv_cache.dtype == torch.bfloat16:
        return KV_FORMAT_BF16
    raise ValueError(
        "flashmsa: argument 'kv_cache': expected dtype bfloat16, float8_e4m3fn or uint8, "
        f"got {kv_cache.dtype}")


def cache_insert(k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor,
                 kv_cache: torch.Tensor, k_scale: float = 1.0, v_scale: float = 1.0,
                 k_swizzled: bool = False, v_swizzled: bool = False) -> None:
    """Writes new K/V rows into ``kv_cache`` (in place).

    k, v: bfloat16 ``[T, Hkv, 128]``, innermost stride 1, 16-byte aligned.
    slot_mapping: int32 ``[T]``, slot = physical_page * 128 + offset; slot < 0 skips
    (int64, as vLLM keeps it, is converted to int32 with a copy).
    kv_cache: see module doc; fp8 stores E4M3_sat(x / scale), nvfp4 block-quantises.
    CPU: a slot >= pages*128 is a ValueError; CUDA: it is skipped.
    """
    _F.cache_insert(k, v, _i32(slot_mapping), kv_cache, k_scale, v_scale, k_swizzled, v_swizzled)


def index_cache_insert(index_k: torch.Tensor, slot_mapping: torch.Tensor,
                       index_cache: torch.Tensor, index_block_scale: Optional[torch.Tensor] = None,
                       index_global_scale: float = 1.0) -> None:
    """Writes index keys (bfloat16 ``[T, 128]``) into ``index_cache`` at int32 ``slot_mapping [T]``.

    bf16 cache: copy; fp8: E4M3_sat(x) (no scale); nvfp4 (uint8 cache + ``index_block_scale``):
    block quantisation with ``index_global_scale``.
    """
    _F.index_cache_insert(index_k, _i32(slot_mapping), index_cache, index_block_scale, index_global_scale)


def quantize_query_e4m3(q: torch.Tensor, q_scale: float, out: torch.Tensor) -> None:
    """out = E4M3_sat(q / q_scale): q bfloat16 ``[T, H, 128]``, out float8_e4m3fn ``[T, H, 128]``."""
    _F.quantize_query_e4m3(q, q_scale, out)


def nvfp4_to_fp8(packed: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """Dense NVFP4 -> E4M3 (bitwise, spec 5.3).

    packed: uint8 ``[R, 64]`` (dim 2i in the low nibble of byte i); scale: float8_e4m3fn
    (or uint8) ``[R, 8]``; out: float8_e4m3fn ``[R, 128]``.
    """
    _F.nvfp4_to_fp8(packed, scale, out)


def fused_qknorm_rope_insert(
        qkv: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
        index_q_norm_weight: torch.Tensor, index_k_norm_weight: torch.Tensor,
        cos_sin_cache: torch.Tensor, positions: torch.Tensor, eps: float, num_q_heads: int,
        num_kv_heads: int, num_index_heads: int, slot_mapping: torch.Tensor,
        kv_cache: torch.Tensor, index_slot_mapping: torch.Tensor, index_cache: torch.Tensor,
        q_out: torch.Tensor, index_q_out: torch.Tensor, q_scale: float = 1.0,
        k_scale: float = 1.0, v_scale: float = 1.0, k_swizzled: bool = False,
        v_swizzled: bool = False, index_block_scale: Optional[torch.Tensor] = None,
        index_global_scale: float = 1.0) -> None:
    """Gemma RMSNorm + partial NeoX RoPE (64 of 128 dims) + cache inserts (spec 1.3, 2.1).

    qkv: bfloat16 ``[T, (Hq + 2*Hkv + Hidx)*128 + 128]`` packed rows
    ``[q | k | v | index_q | index_k]`` (not modified). Norm weights: bfloat16 ``[128]``.
    cos_sin_cache: bfloat16 ``[max_pos, 64]`` (32 cos then 32 sin per position).
    positions, slot_mapping, index_slot_mapping: int32 ``[T]`` (int64 is converted with a copy).
    q_out: bfloat16 or float8_e4m3fn ``[T, Hq, 128]`` (e4m3: E4M3_sat(q / q_scale));
    index_q_out: bfloat16 or float8_e4m3fn ``[T, Hidx, 128]``. Hidx must equal Hkv.
    K is normed + rotated before insertion, V is inserted raw. Every cache format (bf16,
    fp8, nvfp4) on CPU and CUDA.
    """
    _F.fused_qknorm_rope_insert(
        qkv, q_norm_weight, k_norm_weight, index_q_norm_weight, index_k_norm_weight,
        cos_sin_cache, _i32(positions), eps, num_q_heads, num_kv_heads, num_index_heads,
        _i32(slot_mapping), kv_cache, _i32(index_slot_mapping), index_cache, q_out, index_q_out,
        q_scale, k_scale, v_scale, k_swizzled, v_swizzled, index_block_scale,
        index_global_scale)


def indexer_prefill(q: torch.Tensor, index_cache: torch.Tensor, block_table: torch.Tensor,
                    cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor,
                    topk_indices: torch.Tensor, page_scores: Optional[torch.Tensor] = None,
                    index_block_scale: Optional[torch.Tensor] = None,
                    index_global_scale: float = 1.0) -> torch.Tensor:
    """Top-k page selection for (chunked) prefill; returns ``topk_indices``.

    q: bfloat16 or float8_e4m3fn ``[T, H, 128]`` (H = index heads = KV heads).
    block_table: int32 ``[B, max_pages]``; cu_seqlens_q: int32 ``[B+1]``; seq_lens: int32
    ``[B]`` (KV length including the chunk). Row j of request r sits at
    p = seq_len - q_len + j. topk_indices: int32 ``[T, H, K]`` (K <= 16, any strides,
    e.g. a permuted ``[H, T, K]`` buffer). page_scores: optional float32 ``[T, H, W]``,
    W >= max p//128 (max-pooled page scores, -inf beyond the history).
    Selection: pages 0..L when L+1 <= K, else the K-1 best history pages (score desc,
    page asc) then the local page L = p // 128; unused entries -1.
    """
    _F.indexer_prefill(q, index_cache, index_block_scale, index_global_scale, block_table,
                       cu_seqlens_q, seq_lens, topk_indices, page_scores)
    return topk_indices


def indexer_decode(q: torch.Tensor, index_cache: torch.Tensor, block_table: torch.Tensor,
                   seq_lens: torch.Tensor, queries_per_request: int, topk_indices: torch.Tensor,
                   page_scores: Optional[torch.Tensor] = None,
                   index_block_scale: Optional[torch.Tensor] = None,
                   index_global_scale: float = 1.0) -> torch.Tensor:
    """Top-k page selection for decode / MTP; returns ``topk_indices``.

    q: bfloat16 or float8_e4m3fn ``[B*Q, H, 128]`` (row b*Q + j); Q = queries_per_request
    in 1..16; seq_lens int32 ``[B]`` (incl. the Q new tokens; 0 = padding request, its
    rows get -1); query j at p = seq_len - Q + j. topk_indices int32 ``[B*Q, H, K]``.
    """
    _F.indexer_decode(q, index_cache, index_block_scale, index_global_scale, block_table,
                      seq_lens, queries_per_request, topk_indices, page_scores)
    return topk_indices


def topk_select(scores: torch.Tensor, local_page: torch.Tensor,
                topk_indices: Optional[torch.Tensor] = None, k: int = 16) -> torch.Tensor:
    """The selection rule alone (spec D1, D2) on given page scores; returns ``topk_indices``.

    scores: float32 ``[R, W]`` (any strides), W <= 8192: scores[r, b] of the history pages
    b < local_page[r] (columns beyond are not read). local_page: int32 ``[R]``, L per row
    (L < 0: an empty row, all -1); on CPU a row with L + 1 > K needs L <= W (ValueError
    otherwise), on CUDA (contents not read on the host) the missing columns rank as NaN.
    Errors name the C++ arguments 'scores', 'local_page' and 'topk'. topk_indices: int32
    ``[R, K]`` (K in 1..16, any strides), allocated with K = ``k`` when not given. Row r:
    pages 0..L when L + 1 <= K, else the K-1 best history pages (score desc, page asc;
    NaN lowest) then L; unused entries -1. CPU or CUDA (all three tensors on one device;
    on CUDA asynchronous on torch's current stream, no host sync: capturable).
    Errors: ValueError naming the argument (dtype, rank, rows, K range, devices).
    """
    if topk_indices is None:
        topk_indices = torch.empty(scores.shape[0], k, dtype=torch.int32, device=scores.device)
    _F.topk_select(scores, _i32(local_page), topk_indices)
    return topk_indices


def sparse_attention_prefill(q: torch.Tensor, kv_cache: torch.Tensor, topk_indices: torch.Tensor,
                             block_table: torch.Tensor, cu_seqlens_q: torch.Tensor,
                             seq_lens: torch.Tensor, out: torch.Tensor,
                             lse: Optional[torch.Tensor] = None,
                             softmax_scale: float = 0.08838834764831845, q_scale: float = 1.0,
                             k_scale: float = 1.0, v_scale: float = 1.0,
                             k_swizzled: bool = False, v_swizzled: bool = False) -> torch.Tensor:
    """Block-sparse GQA attention for (chunked) prefill; returns ``out``.

    q: bfloat16 ``[T, Hq, 128]`` over a bf16 cache, or float8_e4m3fn (dequant ``q_scale``)
    over an fp8 / nvfp4 cache. topk_indices: int32 ``[T, Hkv, K]`` logical pages (any
    strides, any order; invalid entries ignored). out: bfloat16 ``[T, Hq, 128]``;
    lse: optional float32 ``[T, Hq]`` (natural log). A row with no visible key gets 0 and
    lse -inf. Positions as in :func:`indexer_prefill`; causal inside the local page.
    """
    _F.sparse_attention_prefill(q, kv_cache, topk_indices, block_table, cu_seqlens_q, seq_lens,
                                out, lse, softmax_scale, q_scale, k_scale, v_scale, k_swizzled,
                                v_swizzled)
    return out


def sparse_attention_decode(q: torch.Tensor, kv_cache: torch.Tensor, topk_indices: torch.Tensor,
                            block_table: torch.Tensor, seq_lens: torch.Tensor,
                            queries_per_request: int, out: torch.Tensor,
                            lse: Optional[torch.Tensor] = None,
                            softmax_scale: float = 0.08838834764831845, q_scale: float = 1.0,
                            k_scale: float = 1.0, v_scale: float = 1.0,
                            k_swizzled: bool = False, v_swizzled: bool = False,
                            plan: int = 0) -> torch.Tensor:
    """Decode sparse attention (Q = queries_per_request in 1..32 rows per request).

    q ``[B*Q, Hq, 128]`` (row b*Q + j), topk_indices int32 ``[B*Q, Hkv, K]``, seq_lens int32
    ``[B]`` (0 = padding), out bfloat16 ``[B*Q, Hq, 128]``, lse optional float32
    ``[B*Q, Hq]``. ``plan``: a handle of :class:`flashmsa.SparseDecodeWrapper` (no
    allocation: CUDA-graph capturable), or 0 to use a per-device plan cache keyed by the
    shapes (planned, and on CUDA allocated, on the first call of each shape: do that
    first call outside a graph capture).
    """
    _F.sparse_attention_decode(q, kv_cache, topk_indices, block_table, seq_lens,
                               queries_per_request, out, lse, softmax_scale, q_scale, k_scale,
                               v_scale, k_swizzled, v_swizzled, plan)
    return out
