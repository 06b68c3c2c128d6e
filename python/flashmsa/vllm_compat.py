"""Functions with the argument order of vLLM's MiniMax-M3 Triton ops.

The orders follow the project specification (shared/spec/msa-semantics.md, section 6.2,
which records vLLM's ``minimax_m3`` ``sparse_attn.py`` / ``index_topk.py``); the public
code index did not hold those files, so nothing here was checked against a newer vLLM.
Layouts are vLLM's: top-k is head-major ``[Hkv, T, topk]`` (passed to FlashMSA as a
permuted view, no copy), the K/V cache ``[pages, Hkv, 128, 256]``, the index cache
``[pages, 128, 128]``.

Differences, all raising ValueError rather than computing something else:

* Selection is FlashMSA's (D1): no forced initial blocks, the local page forced:
  ``init_blocks`` must be 0 and ``local_blocks`` 1.
* vLLM's two-step ``index_score`` + ``index_topk`` is fused in FlashMSA's indexer:
  :func:`minimax_m3_index_score_topk` takes the union of their arguments;
  :func:`minimax_m3_index_score` returns the scores alone and
  :func:`minimax_m3_index_topk` selects from them (the two-step path, same result).
* ``k_scale`` / ``v_scale``: None, a float, or a one-element tensor (read with
  ``.item()``: a host sync, so pass floats under CUDA-graph capture); vLLM's per-slot
  ``[Hkv, max_kv_tokens]`` scales are not supported.
* FP8 / NVFP4 caches need an E4M3 query (Q8KV8 / Q8KV4, spec D7): quantise it with
  :func:`flashmsa.quantize_query_e4m3` and pass ``q_scale``.
* Decode assumes the same ``decode_query_len`` for every request (rows b*Q + j);
  ``query_start_loc`` / ``token_to_req_indices`` are accepted and ignored.
* ``max_query_len``, ``max_seq_len`` and ``max_decode_query_len`` are implied by
  ``cu_seqlens_q`` / ``seq_lens`` and ignored, and so is ``prefix_lens`` wherever
  ``seq_lens`` is given (:func:`minimax_m3_index_topk`, which has no ``seq_lens``, uses it).
"""

from typing import Optional, Union

import torch

from . import ops

ScaleArg = Union[None, float, torch.Tensor]


def _scale(name: str, s: ScaleArg) -> float:
    if s is None:
        return 1.0
    if isinstance(s, torch.Tensor):
        if s.numel() != 1:
            raise ValueError(f"flashmsa.vllm_compat: argument '{name}': expected None, a float or a "
                             f"one-element tensor (per-slot scales are not supported), got shape "
                             f"{list(s.shape)}")
        return float(s.item())
    return float(s)


def _kv_heads(kv_cache: torch.Tensor) -> int:
    if kv_cache.dim() != 4:
        raise ValueError("flashmsa.vllm_compat: argument 'kv_cache': expected 4 dimensions, got "
                         f"shape {list(kv_cache.shape)}")
    return kv_cache.shape[1] // 2 if kv_cache.dtype == torch.uint8 else kv_cache.shape[1]


def _check_heads(kv_cache: torch.Tensor, num_kv_heads: int) -> None:
    if _kv_heads(kv_cache) != num_kv_heads:
        raise ValueError("flashmsa.vllm_compat: argument 'num_kv_heads': expected the cache's "
                         f"{_kv_heads(kv_cache)} KV heads, got {num_kv_heads}")


def _check_selection(init_blocks: int, local_blocks: int) -> None:
    if init_blocks != 0 or local_blocks != 1:
        raise ValueError("flashmsa.vllm_compat: arguments 'init_blocks', 'local_blocks': expected "
                         f"0 and 1 (FlashMSA selection, spec D1), got {init_blocks} and {local_blocks}")


def minimax_m3_sparse_attn(q, kv_cache, topk_idx, block_table, cu_seqlens_q, seq_lens,
                           prefix_lens, max_query_len, num_kv_heads, sm_scale, output,
                           k_scale: ScaleArg = None, v_scale: ScaleArg = None, *,
                           q_scale: float = 1.0) -> torch.Tensor:
    """Prefill sparse attention, vLLM order.

    q ``[T, Hq, 128]`` (bfloat16, or float8_e4m3fn with ``q_scale`` for fp8 / nvfp4
    caches); kv_cache ``[pages, Hkv, 128, 256]`` (or NVFP4 ``[pages, 2*Hkv, 128, 72]``);
    topk_idx int32 ``[Hkv, T, topk]`` (any strides); block_table int32 ``[B, max_pages]``;
    cu_seqlens_q int32 ``[B+1]``; seq_lens int32 ``[B]``; output bfloat16 ``[T, Hq, 128]``
    (written, returned).
    """
    _check_heads(kv_cache, num_kv_heads)
    return ops.sparse_attention_prefill(q, kv_cache, topk_idx.transpose(0, 1), block_table,
                                        cu_seqlens_q, seq_lens, output, None, float(sm_scale),
                                        q_scale, _scale("k_scale", k_scale), _scale("v_scale", v_scale))


def minimax_m3_sparse_attn_decode(q, kv_cache, topk_idx, block_table, seq_lens, num_kv_heads,
                                  sm_scale, output, decode_query_len, k_scale: ScaleArg = None,
                                  v_scale: ScaleArg = None, query_start_loc=None,
                                  token_to_req_indices=None, *, q_scale: float = 1.0) -> torch.Tensor:
    """Decode sparse attention, vLLM order: q ``[B*Q, Hq, 128]``, topk_idx ``[Hkv, B*Q, topk]``,
    seq_lens int32 ``[B]``, Q = ``decode_query_len`` (1..32); output ``[B*Q, Hq, 128]``.

    Uses the per-device plan cache: the first call of a shape plans (and on CUDA
    allocates) outside of any capture; later calls allocate nothing.
    """
    _check_heads(kv_cache, num_kv_heads)
    return ops.sparse_attention_decode(q, kv_cache, topk_idx.transpose(0, 1), block_table, seq_lens,
                                       int(decode_query_len), output, None, float(sm_scale), q_scale,
                                       _scale("k_scale", k_scale), _scale("v_scale", v_scale))


def _check_index_heads(idx_q: torch.Tensor, num_kv_heads: int) -> None:
    if idx_q.shape[1] != num_kv_heads:
        raise ValueError(f"flashmsa.vllm_compat: argument 'num_kv_heads': expected idx_q's "
                         f"{idx_q.shape[1]} index heads, got {num_kv_heads}")


def _score_width(max_seq_len: int) -> int:
    pages = (int(max_seq_len) + 127) // 128
    return max(16, (pages + 15) // 16 * 16)


def minimax_m3_index_score(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens,
                           prefix_lens, max_query_len, max_seq_len, num_kv_heads) -> torch.Tensor:
    """Page scores, vLLM order: idx_q ``[T, H, 128]`` -> float32 ``[H, T, W]``,
    W = round_up(ceil(max_seq_len / 128), 16). Entry b < L = p // 128 holds the max over
    the page's tokens of ``idx_q . k``; entries b >= L (the local page and beyond) are -inf
    (vLLM masks per token instead: its local-page entry differs)."""
    _check_index_heads(idx_q, num_kv_heads)
    T, H = idx_q.shape[0], idx_q.shape[1]
    score = torch.empty(H, T, _score_width(max_seq_len), dtype=torch.float32, device=idx_q.device)
    topk = torch.empty(H, T, 16, dtype=torch.int32, device=idx_q.device)
    ops.indexer_prefill(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens,
                        topk.transpose(0, 1), score.transpose(0, 1))
    return score


def _local_pages(T: int, cu_seqlens_q: torch.Tensor, prefix_lens: torch.Tensor,
                 device: torch.device) -> torch.Tensor:
    """int32 [T] on ``device``: the local page p // 128 of every prefill row, p = prefix_len +
    (row index within its request); rows at or beyond cu_seqlens_q[-1] (padding) get -1
    (an empty top-k row). Computed on the device without a host sync (capturable)."""
    cu = cu_seqlens_q.to(device=device, dtype=torch.int64)
    prefix = prefix_lens.to(device=device, dtype=torch.int64)
    B = cu.numel() - 1
    if B <= 0:
        return torch.full((T,), -1, dtype=torch.int32, device=device)
    rows = torch.arange(T, device=device)
    req = torch.searchsorted(cu[1:], rows, right=True)  # request of each row, B for padding
    valid = req < B
    req = req.clamp(max=B - 1)
    pos = prefix[req] + rows - cu[req]
    local = torch.div(pos, 128, rounding_mode="floor")
    return torch.where(valid, local, torch.full_like(local, -1)).to(torch.int32)


def minimax_m3_index_topk(score, cu_seqlens_q, prefix_lens, max_query_len, topk, init_blocks=0,
                          local_blocks=1, out=None) -> torch.Tensor:
    """Top-k from page scores, vLLM order: score float32 ``[H, T, W]`` (as returned by
    :func:`minimax_m3_index_score`) -> int32 ``[H, T, topk]`` (``out`` if given: it must be
    viewable as ``[H*T, topk]``). Row t of request r sits at p = prefix_lens[r] + (t -
    cu_seqlens_q[r]); its history pages b < p // 128 are ranked on score (D1: score desc,
    page asc, NaN lowest), then the local page; -1 padded. Rows at or beyond
    ``cu_seqlens_q[-1]`` (a padded token count) get all -1. Runs on the scores' device
    (``cu_seqlens_q`` / ``prefix_lens`` are moved there), no host sync."""
    _check_selection(init_blocks, local_blocks)
    if score.dim() != 3:
        raise ValueError("flashmsa.vllm_compat: argument 'score': expected [H, T, W], got shape "
                         f"{list(score.shape)}")
    H, T, W = score.shape
    if out is None:
        out = torch.empty(H, T, topk, dtype=torch.int32, device=score.device)
    try:
        rows = out.view(H * T, topk)
    except RuntimeError as e:
        raise ValueError(f"flashmsa.vllm_compat: argument 'out': expected a tensor viewable as "
                         f"[{H * T}, {topk}], got shape {list(out.shape)} strides {list(out.stride())}") from e
    local = _local_pages(T, cu_seqlens_q, prefix_lens, score.device).repeat(H)
    ops.topk_select(score.reshape(H * T, W), local, rows)
    return out


def minimax_m3_index_score_topk(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens,
                                prefix_lens, max_query_len, max_seq_len, num_kv_heads, topk,
                                init_blocks=0, local_blocks=1, out=None) -> torch.Tensor:
    """``index_score`` followed by ``index_topk`` in one call: int32 ``[H, T, topk]``
    (``out`` if given, any strides), FlashMSA order (D1: best history pages by score desc,
    page asc, then the local page; -1 padded)."""
    _check_selection(init_blocks, local_blocks)
    _check_index_heads(idx_q, num_kv_heads)
    if out is None:
        out = torch.empty(idx_q.shape[1], idx_q.shape[0], topk, dtype=torch.int32, device=idx_q.device)
    ops.indexer_prefill(idx_q, index_kv_cache, block_table, cu_seqlens_q, seq_lens, out.transpose(0, 1))
    return out


def minimax_m3_index_decode(idx_q, index_kv_cache, block_table, seq_lens, max_seq_len, topk,
                            init_blocks, local_blocks, num_kv_heads, decode_query_len,
                            max_decode_query_len=None, out=None) -> torch.Tensor:
    """Decode indexer, vLLM order: idx_q ``[B*Q, H, 128]`` (Q = ``decode_query_len``,
    1..16) -> int32 ``[H, B*Q, topk]`` (``out`` if given)."""
    _check_selection(init_blocks, local_blocks)
    _check_index_heads(idx_q, num_kv_heads)
    if out is None:
        out = torch.empty(idx_q.shape[1], idx_q.shape[0], topk, dtype=torch.int32, device=idx_q.device)
    ops.indexer_decode(idx_q, index_kv_cache, block_table, seq_lens, int(decode_query_len),
                       out.transpose(0, 1))
    return out
