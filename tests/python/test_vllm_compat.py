"""vllm_compat functions (vLLM MiniMax-M3 argument order) equal the core ops."""

import pytest
import torch

import flashmsa
from flashmsa import vllm_compat as vc
from refs import PAGE, Batch


def test_sparse_attn_prefill_and_decode(device):
    batch = Batch(q_lens=[30, 90], seq_lens=[500, 900], hkv=2, hq=8, device=device)
    topk = torch.randint(0, batch.max_pages, (batch.hkv, batch.T, 16), dtype=torch.int32).to(device)
    out = torch.empty(batch.T, 8, 128, dtype=torch.bfloat16, device=device)
    vc.minimax_m3_sparse_attn(batch.q, batch.kv_cache, topk, batch.block_table, batch.cu_seqlens_q,
                              batch.seq_lens, None, 90, 2, 0.1, out)
    ref = torch.empty_like(out)
    flashmsa.sparse_attention_prefill(batch.q, batch.kv_cache, topk.transpose(0, 1), batch.block_table,
                                      batch.cu_seqlens_q, batch.seq_lens, ref, softmax_scale=0.1)
    assert torch.equal(out, ref)

    Q = 2
    dec = Batch(q_lens=[Q] * 2, seq_lens=[700, 130], hkv=2, hq=8, device=device)
    topk = torch.randint(0, dec.max_pages, (2, dec.T, 16), dtype=torch.int32).to(device)
    out = torch.empty(dec.T, 8, 128, dtype=torch.bfloat16, device=device)
    vc.minimax_m3_sparse_attn_decode(dec.q, dec.kv_cache, topk, dec.block_table, dec.seq_lens, 2, 0.1,
                                     out, Q, k_scale=torch.tensor([1.0]))
    ref = torch.empty_like(out)
    flashmsa.sparse_attention_decode(dec.q, dec.kv_cache, topk.transpose(0, 1), dec.block_table,
                                     dec.seq_lens, Q, ref, softmax_scale=0.1)
    assert torch.equal(out, ref)


def test_index_score_topk_and_decode(device):
    batch = Batch(q_lens=[40, 3], seq_lens=[2500, 3000], hkv=2, hq=4, device=device)
    got = vc.minimax_m3_index_score_topk(batch.index_q, batch.index_cache, batch.block_table,
                                         batch.cu_seqlens_q, batch.seq_lens, None, 40, 3000, 2, 16)
    ref = torch.empty(batch.T, 2, 16, dtype=torch.int32, device=device)
    flashmsa.indexer_prefill(batch.index_q, batch.index_cache, batch.block_table, batch.cu_seqlens_q,
                             batch.seq_lens, ref)
    assert got.shape == (2, batch.T, 16) and torch.equal(got.transpose(0, 1), ref)
    score = vc.minimax_m3_index_score(batch.index_q, batch.index_cache, batch.block_table,
                                      batch.cu_seqlens_q, batch.seq_lens, None, 40, 3000, 2)
    assert score.shape == (2, batch.T, 32)
    # The two-step path (scores, then top-k from them) selects what the fused call did.
    prefix = batch.seq_lens - (batch.cu_seqlens_q[1:] - batch.cu_seqlens_q[:-1])
    two_step = vc.minimax_m3_index_topk(score, batch.cu_seqlens_q, prefix, 40, 16)
    assert torch.equal(two_step, got)
    # A padded token count (rows beyond cu_seqlens_q[-1]): those rows are all -1, the others
    # unchanged; metadata may live on the CPU.
    padded = torch.full((2, batch.T + 5, 32), float("nan"), device=device)
    padded[:, :batch.T] = score
    two_step = vc.minimax_m3_index_topk(padded, batch.cu_seqlens_q.cpu(), prefix.cpu(), 40, 16)
    assert torch.equal(two_step[:, :batch.T], got) and bool((two_step[:, batch.T:] == -1).all())

    Q = 4
    dec = Batch(q_lens=[Q] * 2, seq_lens=[2500, 300], hkv=1, hq=16, device=device)
    got = vc.minimax_m3_index_decode(dec.index_q, dec.index_cache, dec.block_table, dec.seq_lens, 2500,
                                     16, 0, 1, 1, Q, Q)
    ref = torch.empty(dec.T, 1, 16, dtype=torch.int32, device=device)
    flashmsa.indexer_decode(dec.index_q, dec.index_cache, dec.block_table, dec.seq_lens, Q, ref)
    assert torch.equal(got.transpose(0, 1), ref)


def test_unsupported_arguments_raise():
    batch = Batch(q_lens=[4], seq_lens=[200], hkv=1, hq=16)
    with pytest.raises(ValueError, match="init_blocks"):
        vc.minimax_m3_index_decode(batch.index_q, batch.index_cache, batch.block_table, batch.seq_lens,
                                   200, 16, 1, 1, 1, 4, 4)
    with pytest.raises(ValueError, match="num_kv_heads"):
        vc.minimax_m3_sparse_attn_decode(batch.q, batch.kv_cache, torch.zeros(1, 4, 16, dtype=torch.int32),
                                         batch.block_table, batch.seq_lens, 2, 0.1,
                                         torch.empty(4, 16, 128, dtype=torch.bfloat16), 4)
    with pytest.raises(ValueError, match="per-slot"):
        vc.minimax_m3_sparse_attn_decode(batch.q, batch.kv_cache, torch.zeros(1, 4, 16, dtype=torch.int32),
                                         batch.block_table, batch.seq_lens, 1, 0.1,
                                         torch.empty(4, 16, 128, dtype=torch.bfloat16), 4,
                                         k_scale=torch.ones(1, PAGE))


def test_topk_select_rule(device):
    # D1: L + 1 <= K rows take pages 0..L; otherwise the 15 best history pages (score desc,
    # page asc: ties go to the lower page, NaN ranks last), then L; -1 padded.
    W = 40
    scores = torch.full((4, W), 2.0, device=device)  # all equal
    scores[1, 7] = 5.0
    scores[1, 30] = float("nan")
    scores[2] = torch.arange(W, dtype=torch.float32, device=device)
    local = torch.tensor([39, 39, 20, 3], dtype=torch.int32, device=device)
    out = flashmsa.topk_select(scores, local)
    exp = torch.tensor([list(range(15)) + [39],
                        [7] + list(range(7)) + list(range(8, 15)) + [39],
                        list(range(19, 4, -1)) + [20],
                        [0, 1, 2, 3] + [-1] * 12], dtype=torch.int32)
    assert torch.equal(out.cpu(), exp)
    with pytest.raises(ValueError, match=r"argument '(scores|local_page)'.*expected"):
        flashmsa.topk_select(scores, local[:2])

