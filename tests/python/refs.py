"""Small pure-torch references and batch builders for the python tests (FP64 math)."""

import math

import torch

PAGE = 128
D = 128


class Batch:
    """A paged batch: B requests with (q_len, seq_len), caches with random contents."""

    def __init__(self, q_lens, seq_lens, hkv, hq, kv_dtype=torch.bfloat16, seed=0, extra_pages=2,
                 device="cpu"):
        g = torch.Generator().manual_seed(seed)
        self.B = len(q_lens)
        self.q_lens, self.seq_lens_list = list(q_lens), list(seq_lens)
        self.hkv, self.hq = hkv, hq
        self.max_pages = max(1, max(math.ceil(s / PAGE) for s in seq_lens))
        self.num_pages = self.B * self.max_pages + extra_pages
        perm = torch.randperm(self.num_pages, generator=g)[: self.B * self.max_pages]
        self.block_table = perm.view(self.B, self.max_pages).to(torch.int32)
        self.cu_seqlens_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
        self.seq_lens = torch.tensor(seq_lens, dtype=torch.int32)
        self.T = int(sum(q_lens))
        # Row -> (request, position) (D4).
        self.req = torch.cat([torch.full((q,), b) for b, q in enumerate(q_lens)]).long() if self.T else torch.zeros(0).long()
        self.pos = torch.cat([torch.arange(s - q, s) for q, s in zip(q_lens, seq_lens)]).long() if self.T else torch.zeros(0).long()
        kv = torch.randn(self.num_pages, hkv, PAGE, 2 * D, generator=g)
        self.kv_cache = kv.to(kv_dtype)
        self.index_cache = torch.randn(self.num_pages, PAGE, D, generator=g).to(torch.bfloat16)
        self.q = torch.randn(self.T, hq, D, generator=g).to(torch.bfloat16)
        self.index_q = torch.randn(self.T, hkv, D, generator=g).to(torch.bfloat16)
        self.g = g
        self.to(device)

    def to(self, device):
        for name in ("block_table", "cu_seqlens_q", "seq_lens", "kv_cache", "index_cache", "q", "index_q"):
            setattr(self, name, getattr(self, name).to(device))
        self.device = torch.device(device)
        return self


def ref_page_scores(index_q, index_cache, block_table, req, pos, width):
    """float64 [T, H, width]: max over the page's tokens of q . k for pages b < p // 128."""
    T, H = index_q.shape[0], index_q.shape[1]
    out = torch.full((T, H, width), -math.inf, dtype=torch.float64)
    q = index_q.double().cpu()
    cache = index_cache.double().cpu()
    bt = block_table.cpu()
    for r in range(T):
        p = int(pos[r])
        if p < 0:
            continue
        L = p // PAGE
        if L == 0:
            continue
        keys = cache[bt[int(req[r]), :L].long()]  # [L, 128, D]
        s = torch.einsum("hd,ltd->hlt", q[r], keys).amax(-1)  # [H, L]
        out[r, :, :L] = s
    return out


def ref_select(scores_row, L, K):
    """D1 selection for one (row, head) from page scores (history b < L)."""
    if L < 0:
        return [-1] * K
    n = L + 1
    if n <= K:
        return list(range(n)) + [-1] * (K - n)
    hist = [(-float(scores_row[b]), b) for b in range(L)]
    hist.sort()
    return [b for _, b in hist[: K - 1]] + [L]


def dequant_kv(kv_cache, k_scale=1.0, v_scale=1.0):
    """float64 K, V [pages, Hkv, 128, 128] of a bf16 / fp8 packed cache."""
    c = kv_cache.cpu().double()
    return c[..., :D] * k_scale, c[..., D:] * v_scale


def dequant_nvfp4_kv(kv_cache, k_scale=1.0, v_scale=1.0):
    """float64 K, V [pages, Hkv, 128, 128] of an NVFP4 head-slot cache (linear scales):
    E4M3_sat(e2m1 * block_scale) via flashmsa.nvfp4_to_fp8, times the global scale."""
    import flashmsa

    pages, hkv = kv_cache.shape[0], kv_cache.shape[1] // 2
    flat = kv_cache.cpu().view(pages, 2, hkv * PAGE * 72)
    nd = hkv * PAGE * 64
    sides = []
    for side, scale in ((0, k_scale), (1, v_scale)):
        packed = flat[:, side, :nd].reshape(-1, 64).contiguous()
        sc = flat[:, side, nd:].reshape(-1, 8).contiguous()
        out = torch.empty(packed.shape[0], D, dtype=torch.float8_e4m3fn)
        flashmsa.nvfp4_to_fp8(packed, sc, out)
        sides.append(out.double().view(pages, hkv, PAGE, D) * scale)
    return sides[0], sides[1]


def ref_attention(q, K, V, topk, block_table, seq_lens, req, pos, c):
    """float64 out [T, Hq, 128], lse [T, Hq]; q float64 already dequantised; c = logit scale."""
    T, Hq = q.shape[0], q.shape[1]
    Hkv = K.shape[1]
    G = Hq // Hkv
    out = torch.zeros(T, Hq, D, dtype=torch.float64)
    lse = torch.full((T, Hq), -math.inf, dtype=torch.float64)
    bt, topk, seq_lens = block_table.cpu(), topk.cpu(), seq_lens.cpu()
    for r in range(T):
        p, b = int(pos[r]), int(req[r])
        if p < 0:
            continue
        n_pages = math.ceil(int(seq_lens[b]) / PAGE)
        for g in range(Hkv):
            S = sorted({int(e) for e in topk[r, g] if 0 <= int(e) < n_pages and int(e) <= p // PAGE})
            toks_k, toks_v = [], []
            for e in S:
                n = min(PAGE, p - e * PAGE + 1)
                phys = int(bt[b, e])
                toks_k.append(K[phys, g, :n])
                toks_v.append(V[phys, g, :n])
            if not toks_k:
                continue
            Kr, Vr = torch.cat(toks_k), torch.cat(toks_v)
            z = c * (q[r, g * G:(g + 1) * G] @ Kr.T)  # [G, n]
            lse[r, g * G:(g + 1) * G] = torch.logsumexp(z, -1)
            out[r, g * G:(g + 1) * G] = torch.softmax(z, -1) @ Vr
    return out, lse


def ref_fused_rows(qkv, weights, cos_sin, positions, eps, hq, hkv, hidx):
    """float64 normed + rotated q [T,Hq,128], k [T,Hkv,128], index q [T,Hidx,128], index k [T,128]
    and raw v [T,Hkv,128] (Gemma RMSNorm, NeoX RoPE on 64 of 128 dims)."""
    x = qkv.double().cpu()
    T = x.shape[0]
    sizes = [hq * D, hkv * D, hkv * D, hidx * D, D]
    q, k, v, iq, ik = torch.split(x, sizes, dim=1)
    cs = cos_sin.double().cpu()[positions.cpu().long()]  # [T, 64]
    cos, sin = cs[:, None, :32], cs[:, None, 32:]

    def norm_rope(h, w):
        r = 1.0 / torch.sqrt((h * h).sum(-1, keepdim=True) / D + eps)
        y = h * r * (1.0 + w.double().cpu())
        y1, y2 = y[..., :32].clone(), y[..., 32:64].clone()
        y[..., :32] = y1 * cos - y2 * sin
        y[..., 32:64] = y2 * cos + y1 * sin
        return y

    wq, wk, wiq, wik = weights
    return (norm_rope(q.view(T, hq, D), wq), norm_rope(k.view(T, hkv, D), wk),
            norm_rope(iq.view(T, hidx, D), wiq), norm_rope(ik.view(T, 1, D), wik)[:, 0],
            v.view(T, hkv, D))


def cosine(a, b):
    a, b = a.double().flatten().cpu(), b.double().flatten().cpu()
    return float((a @ b) / (a.norm() * b.norm() + 1e-300))
