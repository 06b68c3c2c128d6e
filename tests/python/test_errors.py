"""Bad inputs raise ValueError / RuntimeError with a message naming the argument."""

import pytest
import torch

import flashmsa
from conftest import requires_cuda
from refs import Batch


@pytest.fixture
def batch():
    return Batch(q_lens=[4], seq_lens=[300], hkv=1, hq=16)


def _out(batch):
    return torch.empty(batch.T, batch.hq, 128, dtype=torch.bfloat16)


def test_wrong_dtype_names_argument(batch):
    with pytest.raises(ValueError, match=r"argument 'q'.*bf16"):
        flashmsa.sparse_attention_prefill(batch.q.float(), batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32),
                                          batch.block_table, batch.cu_seqlens_q, batch.seq_lens, _out(batch))
    with pytest.raises(ValueError, match=r"argument 'q'.*Double"):
        flashmsa.sparse_attention_prefill(batch.q.double(), batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32),
                                          batch.block_table, batch.cu_seqlens_q, batch.seq_lens, _out(batch))
    with pytest.raises(ValueError, match=r"argument 'kv_cache'"):
        flashmsa.cache_insert(batch.q[:, :1], batch.q[:, :1], torch.zeros(4, dtype=torch.int32),
                              batch.kv_cache.float())


def test_wrong_shape_and_contents(batch):
    with pytest.raises(ValueError, match=r"topk_indices"):
        flashmsa.sparse_attention_prefill(batch.q, batch.kv_cache, torch.zeros(4, 2, 16, dtype=torch.int32),
                                          batch.block_table, batch.cu_seqlens_q, batch.seq_lens, _out(batch))
    k = torch.zeros(2, 1, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"slot_mapping"):
        flashmsa.cache_insert(k, k, torch.tensor([0, 10 ** 6], dtype=torch.int32), batch.kv_cache)
    with pytest.raises(ValueError, match=r"rank|dimensions"):
        flashmsa.quantize_query_e4m3(torch.zeros(1, 1, 1, 1, 128, dtype=torch.bfloat16), 1.0,
                                     torch.zeros(1, 1, 128, dtype=torch.float8_e4m3fn))


def test_nvfp4_index_cache_needs_block_scale():
    with pytest.raises(ValueError, match=r"index_block_scale"):
        flashmsa.index_cache_insert(torch.zeros(1, 128, dtype=torch.bfloat16), torch.zeros(1, dtype=torch.int32),
                                    torch.zeros(1, 128, 64, dtype=torch.uint8))


def test_decode_plan_errors(batch):
    w = flashmsa.SparseDecodeWrapper("cpu")
    with pytest.raises(RuntimeError, match="plan"):
        w.run(batch.q, batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32), batch.block_table, batch.seq_lens)
    with pytest.raises(ValueError, match="queries_per_request"):
        w.plan(1, 33, 16, 1, 4)
    with pytest.raises(ValueError, match="num_kv_heads|heads"):
        w.plan(1, 4, 16, 3, 4)
    w.plan(2, 4, 16, 1, 4)  # batch 2 but the tensors have one request
    with pytest.raises(ValueError, match=r"argument .q.: expected shape \[8, 16, 128\]"):
        w.run(batch.q, batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32), batch.block_table, batch.seq_lens)
    with pytest.raises(ValueError, match="plan"):
        flashmsa.sparse_attention_decode(batch.q, batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32),
                                         batch.block_table, batch.seq_lens, 4, _out(batch), plan=123456)
    with pytest.raises(ValueError, match="queries_per_request"):
        flashmsa.DecodeIndexerPlan(1, 17, 1, 4)


@requires_cuda
def test_mixed_devices(batch):
    with pytest.raises(ValueError, match=r"argument 'kv_cache'.*cuda"):
        flashmsa.sparse_attention_prefill(batch.q.cuda(), batch.kv_cache, torch.zeros(4, 1, 16, dtype=torch.int32),
                                          batch.block_table, batch.cu_seqlens_q, batch.seq_lens, _out(batch))


@requires_cuda
def test_cuda_unsupported_is_runtime_error(batch):
    # A (q, kv) format pair outside D7 (bf16 query over an FP8 cache) is Unsupported -> RuntimeError.
    kv8 = batch.kv_cache.to(torch.float8_e4m3fn).cuda()
    with pytest.raises(RuntimeError, match=r"supported \(q, kv\) pairs"):
        flashmsa.sparse_attention_prefill(batch.q.cuda(), kv8, torch.zeros(4, 1, 16, dtype=torch.int32, device="cuda"),
                                          batch.block_table.cuda(), batch.cu_seqlens_q.cuda(), batch.seq_lens.cuda(),
                                          _out(batch).cuda())


def test_build_info():
    assert flashmsa.library_version() == flashmsa.__version__
    assert isinstance(flashmsa.built_with_cuda(), bool)


def test_release_cached_workspace():
    # Any build, with or without a GPU and earlier CUDA calls: no error (without a pool,
    # a no-op; test_cuda.py checks results across a release).
    assert flashmsa.release_cached_workspace() is None
