"""Fake (meta) implementations of the flashmsa ops for torch.compile / FakeTensor.

Every tensor op writes into caller-provided buffers (declared ``Tensor(a!)`` in its
schema) and returns nothing, so each fake only has to return None: shapes and dtypes
of the outputs are the caller's.
"""

import torch

_MUTATING_OPS = (
    "cache_insert",
    "index_cache_insert",
    "quantize_query_e4m3",
    "nvfp4_to_fp8",
    "fused_qknorm_rope_insert",
    "indexer_prefill",
    "indexer_decode",
    "topk_select",
    "sparse_attention_prefill",
    "sparse_attention_decode",
)


def _returns_nothing(*args, **kwargs):
    return None


for _name in _MUTATING_OPS:
    torch.library.register_fake(f"flashmsa::{_name}")(_returns_nothing)
