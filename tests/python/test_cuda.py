"""CUDA tensors against the CPU backend through the binding (skipped without CUDA):
write path byte for byte, indexer top-k identical, attention within spec D8, and a
CUDA-graph capture of a decode step replayed after updating lengths and top-k in place."""

import pytest
import torch

import flashmsa
from conftest import requires_cuda
from refs import PAGE, Batch, cosine

pytestmark = requires_cuda


def test_cuda_kernels_built():
    assert flashmsa.built_with_cuda(), "flashmsa._C was built without CUDA kernels (was nvcc found?)"


def _bytes(t):
    return t.detach().cpu().contiguous().view(torch.uint8)


def _both(fn, *tensors):
    """Runs fn on CPU copies and on CUDA copies of `tensors`; returns (cpu, cuda) tuples."""
    cpu = [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]
    gpu = [t.cuda() if isinstance(t, torch.Tensor) else t for t in tensors]
    fn(*cpu)
    fn(*gpu)
    torch.cuda.synchronize()
    return cpu, gpu


def _d8(a, b, fp8):
    tol = 5e-2 if fp8 else 3e-2
    torch.testing.assert_close(a.float().cpu(), b.float().cpu(), atol=tol, rtol=tol)
    assert cosine(a, b) >= (0.999 if fp8 else 0.9999)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "nvfp4", "nvfp4_swizzled"])
def test_cache_insert(fmt):
    T, hkv, pages = 300, 2, 4
    k = torch.randn(T, hkv, 128).bfloat16()
    v = torch.randn(T, hkv, 128).bfloat16()
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32)
    slots[::7] = -1
    if fmt.startswith("nvfp4"):
        kv = torch.zeros(pages, 2 * hkv, PAGE, 72, dtype=torch.uint8)
    else:
        kv = torch.zeros(pages, hkv, PAGE, 256, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn)
    sw = fmt == "nvfp4_swizzled"
    ks, vs = (1.0, 1.0) if fmt == "bf16" else (0.5, 2.0)  # a bf16 cache has no scales
    cpu, gpu = _both(lambda k, v, s, c: flashmsa.cache_insert(k, v, s, c, ks, vs, sw, sw), k, v, slots, kv)
    assert torch.equal(_bytes(cpu[3]), _bytes(gpu[3]))


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "nvfp4"])
def test_index_cache_insert_quantize_nvfp4_to_fp8(fmt):
    T, pages = 200, 2
    ik = torch.randn(T, 128).bfloat16()
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32)
    if fmt == "nvfp4":
        codes = torch.zeros(pages, PAGE, 64, dtype=torch.uint8)
        scales = torch.zeros(pages, PAGE, 8, dtype=torch.float8_e4m3fn)
        cpu, gpu = _both(lambda a, s, c, b: flashmsa.index_cache_insert(a, s, c, b, 1.0), ik, slots, codes, scales)
        assert torch.equal(_bytes(cpu[2]), _bytes(gpu[2])) and torch.equal(_bytes(cpu[3]), _bytes(gpu[3]))
        out = torch.empty(pages * PAGE, 128, dtype=torch.float8_e4m3fn)
        c2, g2 = _both(flashmsa.nvfp4_to_fp8, cpu[2].view(-1, 64), cpu[3].view(-1, 8), out)
        assert torch.equal(_bytes(c2[2]), _bytes(g2[2]))
    else:
        cache = torch.zeros(pages, PAGE, 128, dtype=torch.bfloat16 if fmt == "bf16" else torch.float8_e4m3fn)
        cpu, gpu = _both(flashmsa.index_cache_insert, ik, slots, cache)
        assert torch.equal(_bytes(cpu[2]), _bytes(gpu[2]))
    q = torch.randn(33, 4, 128).bfloat16()
    out = torch.empty(33, 4, 128, dtype=torch.float8_e4m3fn)
    cpu, gpu = _both(lambda q, o: flashmsa.quantize_query_e4m3(q, 0.3, o), q, out)
    assert torch.equal(_bytes(cpu[1]), _bytes(gpu[1]))


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("heads", [(64, 4), (16, 1)])
def test_fused_qknorm_rope_insert(kv_dtype, heads):
    hq, hkv = heads
    T, pages = 257, 4
    qkv = torch.randn(T, (hq + 3 * hkv + 1) * 128).bfloat16()
    ws = [(torch.randn(128) * 0.1).bfloat16() for _ in range(4)]
    cs = torch.randn(1000, 64).bfloat16()
    pos = torch.randint(0, 1000, (T,), dtype=torch.int32)
    slots = torch.randperm(pages * PAGE)[:T].to(torch.int32)
    islots = torch.randperm(pages * PAGE)[:T].to(torch.int32)
    kv = torch.zeros(pages, hkv, PAGE, 256, dtype=kv_dtype)
    ic = torch.zeros(pages, PAGE, 128, dtype=kv_dtype)
    q_dtype = torch.bfloat16 if kv_dtype == torch.bfloat16 else torch.float8_e4m3fn
    q_out = torch.empty(T, hq, 128, dtype=q_dtype)
    iq_out = torch.empty(T, hkv, 128, dtype=q_dtype)
    qs, ks, vs = (1.0, 1.0, 1.0) if q_dtype == torch.bfloat16 else (0.5, 0.7, 1.3)

    def fn(qkv, w0, w1, w2, w3, cs, pos, slots, kv, islots, ic, q_out, iq_out):
        flashmsa.fused_qknorm_rope_insert(qkv, w0, w1, w2, w3, cs, pos, 1e-6, hq, hkv, hkv, slots, kv, islots,
                                          ic, q_out, iq_out, q_scale=qs, k_scale=ks, v_scale=vs)

    cpu, gpu = _both(fn, qkv, *ws, cs, pos, slots, kv, islots, ic, q_out, iq_out)
    for i in (8, 10, 11, 12):
        assert torch.equal(_bytes(cpu[i]), _bytes(gpu[i])), i


def _indexer_case(decode):
    if decode:
        return Batch(q_lens=[4] * 3, seq_lens=[20000, 0, 3000], hkv=4, hq=64)
    return Batch(q_lens=[300, 1, 700], seq_lens=[9000, 2000, 700], hkv=4, hq=64)


@pytest.mark.parametrize("decode", [False, True])
def test_indexer(decode):
    b = _indexer_case(decode)
    topk = torch.empty(b.T, b.hkv, 16, dtype=torch.int32)
    scores = torch.empty(b.T, b.hkv, b.max_pages, dtype=torch.float32)
    if decode:
        fn = lambda q, c, bt, sl, tk, ps: flashmsa.indexer_decode(q, c, bt, sl, 4, tk, ps)  # noqa: E731
        cpu, gpu = _both(fn, b.index_q, b.index_cache, b.block_table, b.seq_lens, topk, scores)
    else:
        cpu, gpu = _both(flashmsa.indexer_prefill, b.index_q, b.index_cache, b.block_table, b.cu_seqlens_q,
                         b.seq_lens, topk, scores)
    assert torch.equal(cpu[-2], gpu[-2].cpu())
    torch.testing.assert_close(gpu[-1].cpu(), cpu[-1], rtol=2e-4, atol=0)


def test_release_cached_workspace():
    # The prefill indexer's workspace comes from FlashMSA's pool; releasing it between two
    # calls changes nothing in the results.
    b = _indexer_case(False)
    outs = []
    for _ in range(2):
        topk = torch.empty(b.T, b.hkv, 16, dtype=torch.int32, device="cuda")
        flashmsa.indexer_prefill(b.index_q.cuda(), b.index_cache.cuda(), b.block_table.cuda(),
                                 b.cu_seqlens_q.cuda(), b.seq_lens.cuda(), topk)
        torch.cuda.synchronize()
        outs.append(topk.cpu())
        flashmsa.release_cached_workspace()
    assert torch.equal(outs[0], outs[1])


def _quantised_batch(fmt, q_lens, seq_lens, hkv, hq):
    b = Batch(q_lens=q_lens, seq_lens=seq_lens, hkv=hkv, hq=hq)
    q_scale, ks, vs = 1.0, 1.0, 1.0
    q = b.q
    if fmt != "bf16":
        q_scale, ks, vs = 0.25, 0.5, 2.0
        q = torch.empty(b.q.shape, dtype=torch.float8_e4m3fn)
        flashmsa.quantize_query_e4m3(b.q, q_scale, q)
        src = b.kv_cache.float()
        k = src[..., :128].permute(0, 2, 1, 3).reshape(-1, hkv, 128).bfloat16()
        v = src[..., 128:].permute(0, 2, 1, 3).reshape(-1, hkv, 128).bfloat16()
        if fmt == "fp8":
            kv = torch.zeros(b.num_pages, hkv, PAGE, 256, dtype=torch.float8_e4m3fn)
        else:
            kv = torch.zeros(b.num_pages, 2 * hkv, PAGE, 72, dtype=torch.uint8)
        flashmsa.cache_insert(k, v, torch.arange(k.shape[0], dtype=torch.int32), kv, ks, vs)
        b.kv_cache = kv
    g = torch.Generator().manual_seed(3)
    topk = torch.randint(-1, b.max_pages + 1, (b.T, hkv, 16), generator=g, dtype=torch.int32)
    topk[:, :, 0] = (b.pos // PAGE).to(torch.int32)[:, None]
    return b, q, topk, dict(q_scale=q_scale, k_scale=ks, v_scale=vs)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "nvfp4"])
def test_sparse_attention_prefill(fmt):
    b, q, topk, sc = _quantised_batch(fmt, [300, 77], [5000, 77], 4, 64)
    out = torch.empty(b.T, 64, 128, dtype=torch.bfloat16)
    lse = torch.empty(b.T, 64, dtype=torch.float32)
    fn = lambda *a: flashmsa.sparse_attention_prefill(*a, **sc)  # noqa: E731
    cpu, gpu = _both(fn, q, b.kv_cache, topk, b.block_table, b.cu_seqlens_q, b.seq_lens, out, lse)
    _d8(gpu[6], cpu[6], fmt != "bf16")
    torch.testing.assert_close(gpu[7].cpu(), cpu[7], atol=1e-3 if fmt == "bf16" else 3e-3, rtol=0)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "nvfp4"])
@pytest.mark.parametrize("Q", [1, 8])
def test_sparse_attention_decode(fmt, Q):
    b, q, topk, sc = _quantised_batch(fmt, [Q] * 4, [9000, 0, 1000, 129], 1, 16)
    out = torch.empty(b.T, 16, 128, dtype=torch.bfloat16)
    kv_dtype = b.kv_cache.dtype
    res = []
    for dev in ("cpu", "cuda"):
        w = flashmsa.SparseDecodeWrapper(dev)
        w.plan(4, Q, 16, 1, b.max_pages, kv_dtype=kv_dtype, **sc)
        o = out.clone().to(dev)
        w.run(q.to(dev), b.kv_cache.to(dev), topk.to(dev), b.block_table.to(dev), b.seq_lens.to(dev), o)
        res.append(o)
    torch.cuda.synchronize()
    _d8(res[1], res[0], fmt != "bf16")


def test_cuda_graph_decode_replay():
    """Capture indexer + attention of a decode step once; replay after updating lengths,
    block table and (for attention alone) the top-k buffer in place."""
    Q, B, hq, hkv = 4, 3, 16, 1
    b = Batch(q_lens=[Q] * B, seq_lens=[3000, 1700, 400], hkv=hkv, hq=hq, device="cuda")
    ind = flashmsa.DecodeIndexerPlan(B, Q, hkv, b.max_pages, device="cuda")
    ind.update(seq_lens=b.seq_lens - 2 * Q, block_table=b.block_table)
    w = flashmsa.SparseDecodeWrapper("cuda")
    w.plan(B, Q, hq, hkv, b.max_pages)
    out = torch.empty(b.T, hq, 128, dtype=torch.bfloat16, device="cuda")

    def step():
        topk = ind.run(b.index_q, b.index_cache)
        w.run(b.q, b.kv_cache, topk, ind.block_table, ind.seq_lens, out)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up outside the capture (module loading, plan-free launches)
        ind.advance()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    adv = torch.cuda.CUDAGraph()
    with torch.cuda.graph(adv):
        ind.advance()

    for lens in ([2900, 1000, 130], [3000, 0, 400]):
        ind.update(seq_lens=torch.tensor(lens, dtype=torch.int32, device="cuda"))
        g.replay()
        ref_topk = torch.empty(b.T, hkv, 16, dtype=torch.int32, device="cuda")
        flashmsa.indexer_decode(b.index_q, b.index_cache, b.block_table, ind.seq_lens, Q, ref_topk)
        ref = torch.empty_like(out)
        flashmsa.sparse_attention_decode(b.q, b.kv_cache, ref_topk, b.block_table, ind.seq_lens, Q, ref)
        torch.cuda.synchronize()
        assert torch.equal(ind.topk_indices, ref_topk)
        assert torch.equal(out, ref)  # D9: deterministic, graph or not

    adv.replay()
    adv.replay()
    torch.cuda.synchronize()
    assert ind.seq_lens.tolist() == [3000 + 2 * Q, 0, 400 + 2 * Q]

    # Attention alone over a static top-k buffer rewritten in place between replays.
    tk = torch.full((b.T, hkv, 16), -1, dtype=torch.int32, device="cuda")
    sl = b.seq_lens.clone()
    ga = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        w.run(b.q, b.kv_cache, tk, b.block_table, sl, out)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(ga):
        w.run(b.q, b.kv_cache, tk, b.block_table, sl, out)
    for seed in (1, 2):
        gen = torch.Generator().manual_seed(seed)
        tk.copy_(torch.randint(0, b.max_pages, (b.T, hkv, 16), generator=gen, dtype=torch.int32))
        sl.copy_(b.seq_lens - seed)
        ga.replay()
        ref = torch.empty_like(out)
        flashmsa.sparse_attention_decode(b.q, b.kv_cache, tk, b.block_table, sl, Q, ref, plan=w._handle)
        torch.cuda.synchronize()
        assert torch.equal(out, ref)
