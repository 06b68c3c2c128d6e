"""FlashMSA: MiniMax Sparse Attention (MSA) ops for PyTorch.

Importing this package loads ``flashmsa._C``, which registers the C++ ops as
``torch.ops.flashmsa.*`` (CPU and CUDA kernels, usable under ``torch.compile`` and in
CUDA graphs), and registers their fake (meta) implementations.

* :mod:`flashmsa.ops` -- one python function per op (shapes, dtypes, errors).
* :mod:`flashmsa.wrappers` -- ``SparsePrefillWrapper``, ``SparseDecodeWrapper``,
  ``DecodeIndexerPlan`` (plan once, run per layer).
* :mod:`flashmsa.vllm_compat` -- functions with the argument order of vLLM's MiniMax-M3
  Triton ops.
"""

import torch  # noqa: F401  (loads libtorch before the extension)

from . import _C  # noqa: F401  (registers torch.ops.flashmsa.*)
from . import _fake  # noqa: F401  (fake implementations for torch.compile)
from .ops import (
    KV_FORMAT_BF16,
    KV_FORMAT_FP8,
    KV_FORMAT_NVFP4,
    cache_insert,
    fused_qknorm_rope_insert,
    index_cache_insert,
    indexer_decode,
    indexer_prefill,
    kv_format_of,
    nvfp4_to_fp8,
    quantize_query_e4m3,
    sparse_attention_decode,
    sparse_attention_prefill,
    topk_select,
)
from .wrappers import DecodeIndexerPlan, SparseDecodeWrapper, SparsePrefillWrapper

__version__ = "0.1.0"


def built_with_cuda() -> bool:
    """True when the library was built with its SM90 CUDA kernels (nvcc found at build time);
    otherwise CUDA tensors raise RuntimeError (Unsupported)."""
    return bool(torch.ops.flashmsa.built_with_cuda())


def release_cached_workspace() -> None:
    """Returns the unused memory of FlashMSA's CUDA workspace pool to the driver.

    On CUDA, ``sparse_attention_prefill`` and ``indexer_prefill`` take their per-call
    workspaces (hundreds of MB at long contexts) from a FlashMSA-private stream-ordered
    memory pool that keeps its memory between calls, outside torch's caching allocator
    (``torch.cuda.memory_allocated`` does not count it). This releases it on every device,
    like ``torch.cuda.empty_cache()``; workspaces of calls still in flight stay. A no-op
    in a build without CUDA or before any CUDA call. C++: ``flashmsa::release_cached_workspace``
    (``include/flashmsa/memory.h``)."""
    torch.ops.flashmsa.release_cached_workspace()


def library_version() -> str:
    """Version of the C++ library linked into flashmsa._C."""
    return str(torch.ops.flashmsa.version())


DEFAULT_SOFTMAX_SCALE = 0.08838834764831845  # 1/sqrt(128)
PAGE_SIZE = 128
HEAD_DIM = 128
MAX_TOPK = 16

__all__ = [
    "DecodeIndexerPlan", "SparseDecodeWrapper", "SparsePrefillWrapper",
    "cache_insert", "fused_qknorm_rope_insert", "index_cache_insert", "indexer_decode",
    "indexer_prefill", "kv_format_of", "nvfp4_to_fp8", "quantize_query_e4m3",
    "sparse_attention_decode", "sparse_attention_prefill", "topk_select",
    "KV_FORMAT_BF16", "KV_FORMAT_FP8", "KV_FORMAT_NVFP4",
    "DEFAULT_SOFTMAX_SCALE", "PAGE_SIZE", "HEAD_DIM", "MAX_TOPK", "built_with_cuda", "library_version",
    "release_cached_workspace",
]
