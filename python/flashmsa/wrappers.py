"""Plan/run wrappers in the style inference engines use (FlashInfer / MSA v1).

* :class:`SparsePrefillWrapper`: ``plan(metadata)`` once per batch, then per layer
  ``select(index_q, index_cache)`` (indexer) and ``run(q, kv_cache, topk)`` (attention).
* :class:`SparseDecodeWrapper`: wraps one C++ ``SparseDecodePlan``: ``plan(capacities)``
  once on the host (allocates the workspace), ``run(...)`` per layer and step, with no
  allocation and no host sync (CUDA-graph capturable; metadata contents are read on the
  device at run time, so graphs replay after updating them in place).
* :class:`DecodeIndexerPlan`: persistent metadata buffers of a decode step shared by all
  layers; ``update()`` / ``advance()`` change lengths in place (capturable).
"""

from typing import Optional, Tuple

import torch

from . import ops

DEFAULT_SOFTMAX_SCALE = 0.08838834764831845


def _i32(name: str, t: torch.Tensor) -> torch.Tensor:
    if t.dtype != torch.int32:
        raise ValueError(f"flashmsa: argument '{name}': expected dtype torch.int32, got {t.dtype}")
    return t


class SparsePrefillWrapper:
    """Prefill (varlen, chunked) indexer + sparse attention over one batch's metadata.

    ``plan(cu_seqlens_q [B+1], seq_lens [B], block_table [B, max_pages])`` (int32, on the
    device of the layer tensors) keeps references to the metadata; every layer then calls
    :meth:`select` and :meth:`run`. Row j of request r sits at p = seq_len - q_len + j.
    """

    def __init__(self, softmax_scale: float = DEFAULT_SOFTMAX_SCALE):
        self.softmax_scale = softmax_scale
        self._planned = False

    def plan(self, cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor,
             *, q_scale: float = 1.0, k_scale: float = 1.0, v_scale: float = 1.0,
             k_swizzled: bool = False, v_swizzled: bool = False,
             softmax_scale: Optional[float] = None) -> None:
        """Stores the batch metadata and the cache scales (no copy, no sync)."""
        self.cu_seqlens_q = _i32("cu_seqlens_q", cu_seqlens_q)
        self.seq_lens = _i32("seq_lens", seq_lens)
        self.block_table = _i32("block_table", block_table)
        self.q_scale, self.k_scale, self.v_scale = q_scale, k_scale, v_scale
        self.k_swizzled, self.v_swizzled = k_swizzled, v_swizzled
        if softmax_scale is not None:
            self.softmax_scale = softmax_scale
        self._planned = True

    def _check(self):
        if not self._planned:
            raise RuntimeError("flashmsa.SparsePrefillWrapper: call plan() before select() / run()")

    def select(self, index_q: torch.Tensor, index_cache: torch.Tensor, *, topk: int = 16,
               out: Optional[torch.Tensor] = None, index_block_scale: Optional[torch.Tensor] = None,
               index_global_scale: float = 1.0) -> torch.Tensor:
        """Indexer: index_q ``[T, H, 128]`` -> top-k int32 ``[T, H, topk]`` (``out`` if given)."""
        self._check()
        if out is None:
            out = torch.empty(index_q.shape[0], index_q.shape[1], topk, dtype=torch.int32,
                              device=index_q.device)
        return ops.indexer_prefill(index_q, index_cache, self.block_table, self.cu_seqlens_q,
                                   self.seq_lens, out, None, index_block_scale, index_global_scale)

    def run(self, q: torch.Tensor, kv_cache: torch.Tensor, topk_indices: torch.Tensor, *,
            out: Optional[torch.Tensor] = None, lse: Optional[torch.Tensor] = None,
            return_lse: bool = False):
        """Attention: q ``[T, Hq, 128]``, topk ``[T, Hkv, K]`` -> bfloat16 ``[T, Hq, 128]``
        (and float32 lse ``[T, Hq]`` when ``return_lse``)."""
        self._check()
        if out is None:
            out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
        if return_lse and lse is None:
            lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
        ops.sparse_attention_prefill(q, kv_cache, topk_indices, self.block_table,
                                     self.cu_seqlens_q, self.seq_lens, out, lse,
                                     self.softmax_scale, self.q_scale, self.k_scale, self.v_scale,
                                     self.k_swizzled, self.v_swizzled)
        return (out, lse) if return_lse else out


class SparseDecodeWrapper:
    """Decode sparse attention through one C++ ``SparseDecodePlan`` serving every layer.

    ``plan()`` runs on the host, outside any graph capture: it validates the capacities
    (D10), picks the CUDA split-KV factor and allocates the workspace. ``run()`` launches
    on torch's current stream with no allocation (pass ``out``) and no host sync, reading
    ``seq_lens`` / ``block_table`` / ``topk_indices`` contents on the device. One wrapper
    per stream: runs of one plan share its workspace.
    """

    def __init__(self, device="cpu", num_threads: int = 0):
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.num_threads = num_threads
        self._handle = 0

    def plan(self, batch_size: int, queries_per_request: int, num_q_heads: int, num_kv_heads: int,
             max_pages_per_request: int, *, topk: int = 16, kv_dtype: torch.dtype = torch.bfloat16,
             q_dtype: Optional[torch.dtype] = None, softmax_scale: float = DEFAULT_SOFTMAX_SCALE,
             q_scale: float = 1.0, k_scale: float = 1.0, v_scale: float = 1.0,
             k_swizzled: bool = False, v_swizzled: bool = False) -> None:
        """Plans for ``batch_size`` requests of Q = ``queries_per_request`` rows (1..32),
        a block table of ``max_pages_per_request`` columns and top-k ``topk``.

        ``kv_dtype``: bfloat16 / float8_e4m3fn / uint8 (NVFP4) -- the kv_cache dtype;
        ``q_dtype`` defaults to bfloat16 for a bf16 cache and float8_e4m3fn otherwise.
        Raises ValueError for capacities outside D10, RuntimeError for an unsupported
        (q, kv) pair or device.
        """
        fmt = ops.kv_format_of(torch.empty(0, dtype=kv_dtype))
        if q_dtype is None:
            q_dtype = torch.bfloat16 if fmt == ops.KV_FORMAT_BF16 else torch.float8_e4m3fn
        handle = torch.ops.flashmsa.decode_plan_create(
            batch_size, queries_per_request, num_q_heads, num_kv_heads, max_pages_per_request,
            topk, fmt, q_dtype, self.device, self.num_threads)
        self.close()
        self._handle = handle
        self.batch_size, self.queries_per_request = batch_size, queries_per_request
        self.num_q_heads, self.num_kv_heads = num_q_heads, num_kv_heads
        self.max_pages_per_request, self.topk = max_pages_per_request, topk
        self.softmax_scale, self.q_scale = softmax_scale, q_scale
        self.k_scale, self.v_scale = k_scale, v_scale
        self.k_swizzled, self.v_swizzled = k_swizzled, v_swizzled

    def run(self, q: torch.Tensor, kv_cache: torch.Tensor, topk_indices: torch.Tensor,
            block_table: torch.Tensor, seq_lens: torch.Tensor, out: Optional[torch.Tensor] = None,
            lse: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One layer: q ``[B*Q, Hq, 128]``, topk int32 ``[B*Q, Hkv, K]``, block_table int32
        ``[B, >= max_pages]``, seq_lens int32 ``[B]`` (0 = padding) -> out bfloat16
        ``[B*Q, Hq, 128]`` (allocated when None: pass ``out`` under graph capture)."""
        if self._handle == 0:
            raise RuntimeError("flashmsa.SparseDecodeWrapper: call plan() before run()")
        if out is None:
            out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
        return ops.sparse_attention_decode(q, kv_cache, topk_indices, block_table, seq_lens,
                                           self.queries_per_request, out, lse, self.softmax_scale,
                                           self.q_scale, self.k_scale, self.v_scale,
                                           self.k_swizzled, self.v_swizzled, self._handle)

    def close(self) -> None:
        """Frees the plan's workspace (the wrapper can be planned again)."""
        if self._handle:
            torch.ops.flashmsa.decode_plan_destroy(self._handle)
            self._handle = 0

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class DecodeIndexerPlan:
    """Decode-step metadata shared by every layer's indexer (and attention).

    Owns address-stable int32 buffers ``seq_lens [B]``, ``block_table [B, max_pages]`` and
    ``topk_indices [B*Q, H, topk]`` on ``device``. :meth:`update` and :meth:`advance` change
    them in place on the current stream (no allocation of persistent memory, no host
    sync), so a captured CUDA graph that reads them replays with the new values.
    """

    def __init__(self, batch_size: int, queries_per_request: int, num_index_heads: int,
                 max_pages_per_request: int, *, topk: int = 16, device="cpu"):
        if not 1 <= queries_per_request <= 16:
            raise ValueError("flashmsa.DecodeIndexerPlan: argument 'queries_per_request': "
                             f"expected 1..16, got {queries_per_request}")
        self.batch_size, self.queries_per_request = batch_size, queries_per_request
        self.num_index_heads, self.topk = num_index_heads, topk
        dev = torch.device(device)
        self.seq_lens = torch.zeros(batch_size, dtype=torch.int32, device=dev)
        self.block_table = torch.zeros(batch_size, max_pages_per_request, dtype=torch.int32, device=dev)
        self.topk_indices = torch.full((batch_size * queries_per_request, num_index_heads, topk), -1,
                                       dtype=torch.int32, device=dev)

    def update(self, seq_lens: Optional[torch.Tensor] = None,
               block_table: Optional[torch.Tensor] = None) -> None:
        """Copies new lengths ``[B]`` / block-table rows into the buffers (capturable)."""
        if seq_lens is not None:
            self.seq_lens.copy_(seq_lens, non_blocking=True)
        if block_table is not None:
            self.block_table[:, : block_table.shape[1]].copy_(block_table, non_blocking=True)

    def advance(self, num_tokens: Optional[int] = None) -> None:
        """Adds ``num_tokens`` (default Q) to every non-padding length, in place (capturable)."""
        n = self.queries_per_request if num_tokens is None else num_tokens
        self.seq_lens.add_(self.seq_lens.gt(0).to(torch.int32), alpha=n)

    def run(self, index_q: torch.Tensor, index_cache: torch.Tensor, *,
            out: Optional[torch.Tensor] = None, page_scores: Optional[torch.Tensor] = None,
            index_block_scale: Optional[torch.Tensor] = None,
            index_global_scale: float = 1.0) -> torch.Tensor:
        """index_q ``[B*Q, H, 128]`` -> top-k int32 ``[B*Q, H, topk]`` (into ``out`` or the
        plan's ``topk_indices`` buffer)."""
        out = self.topk_indices if out is None else out
        return ops.indexer_decode(index_q, index_cache, self.block_table, self.seq_lens,
                                  self.queries_per_request, out, page_scores, index_block_scale,
                                  index_global_scale)
