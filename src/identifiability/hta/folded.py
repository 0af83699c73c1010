"""The folded forward-mode pass for post-LayerNorm encoder layers (registry rows marked ``foldable``).

A hand-written batched forward-mode pass. Everything after the attention mixing acts on a tangent position
by position, through one d x d matrix per position, P_p = J_LN1 (I + W1ᵀ diag(act'(z_p)) W2ᵀ) J_LN2
(row-vector convention), precomputed once per sentence; the tangent then costs about 10d² FLOPs per
position and layer instead of about 24d². The score tangent needs no Q/K tangents: per head,
dq_pb·k_t = t_pb·(W_qᵀ k_t) and q_p·dk_tb = t_tb·(W_kᵀ q_p), so with these 2H·n score rows precomputed once
per sentence it is one product, 2·d·H·n MACs per tangent row instead of 2d² for the Q/K projections plus
2·n·d; that path is taken where it is fewer, n·(H − 1) < d (on the embedded model n ≤ 34), and costs
about 6d² + 4·d·H·n FLOPs per position and layer. In the first layer a direction is non-zero at one
position, so its Q/K/V projections and its score products are one row. :func:`.api.hta` chooses the
folded pass automatically where it applies (:func:`fold_spec` reads the layers through the architecture
registry); its own primal pass is checked against the model's hidden states before any tangent is
pushed, and it falls back to the generic path (with a warning) when they disagree. :func:`folded_layer_S`
runs the same pass for exact HTA of each layer alone (chapter 10's one-layer reference).

Memory (float32, B = tangent directions per chunk, n = d_s, H heads, d width, d_ff FFN width, L layers):
the per-sentence state, 4·L·n·(d² + 8d + d_ff + 2H·n) bytes (the P_p dominate: 4·L·n·d²) and 8·H·n·d for
the score rows of each layer that uses them, plus the larger of the chunk working set, at most
4·B·n·(12d + 3H·n) bytes (about 8d + H·n floats per tangent row are alive at once, 5d + 3H·n on the
score-row path; the rest is margin), and the folding's temporary while the state is built,
4·min(n, 8192/d)·d·d_ff bytes; plus the output S (squared norms), 8·(L+1)·n² bytes. (The allocator and
the BLAS library add their own buffers on top, and glibc's heap keeps freed blocks resident: the resident-set
growth of the same pass varies from one process to the next and can pass the bound at short lengths. The
benchmark records its own measurement next to the bound.)
:func:`peak_bytes` evaluates these bounds (and the generic path's, see :mod:`.generic`); the benchmark
measures the peak.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..models.loaded_model import LoadedModel
from .core import Directions, Inputs, auto_chunk

PRIMAL_TOL = 1e-4  # the folded pass's own forward must match the model's hidden states this closely
_STRIDED_MAX_N = 48  # up to this d_s the q·dk score term is added through a strided view (measured faster)

# Element-wise activations the folded pass accepts (its derivative is taken by autograd element-wise).
_ELEMENTWISE_ACTS = {
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "gelu_python",
    "quick_gelu",
    "gelu_accurate",
    "relu",
    "silu",
    "swish",
    "tanh",
    "mish",
    "gelu_10",
}


@dataclass
class _PostLNLayer:
    """Weights of one post-LN layer (torch ``nn.Linear`` convention: y = x Wᵀ + b)."""

    wqkv: torch.Tensor  # (3d, d)
    bqkv: torch.Tensor  # (3d,)
    wo: torch.Tensor  # (d, d)
    bo: torch.Tensor
    ln1: nn.LayerNorm
    w1: torch.Tensor  # (d_ff, d)
    b1: torch.Tensor
    act: nn.Module
    w2: torch.Tensor  # (d, d_ff)
    b2: torch.Tensor
    ln2: nn.LayerNorm
    scaling: float


def fold_spec(lm: LoadedModel) -> list[_PostLNLayer] | None:
    """The layers of a post-LN model, read through the adapter's registry row, or None if the folded pass
    does not apply (then :func:`.api.hta` uses the generic path): the row must be ``foldable`` (post-LN, no
    causal mask) and the activation element-wise (exact ``gelu`` and the tanh approximations are told
    apart by using the model's own activation module)."""
    a, cfg, m, L = lm.adapter, lm.config, lm.model, lm.n_layers
    if not a.foldable or a.causal or a.pre_ln or getattr(cfg, "is_decoder", False):
        return None
    if getattr(cfg, "add_cross_attention", False) or a.activation(cfg) not in _ELEMENTWISE_ACTS:
        return None
    mods = {
        f: a.layer_modules(m, getattr(a, f), L)
        for f in ("query", "key", "value", "attn_out", "ln_attn", "ffn_in", "ffn_act", "ffn_out", "ln_ffn")
    }
    if any(not isinstance(ln, nn.LayerNorm) for ln in mods["ln_attn"] + mods["ln_ffn"]):
        return None
    layers = []
    for i in range(L):
        q, k, v = mods["query"][i], mods["key"][i], mods["value"][i]
        layers.append(
            _PostLNLayer(
                torch.cat([a.weight(q), a.weight(k), a.weight(v)]),
                torch.cat([q.bias, k.bias, v.bias]).detach(),
                a.weight(mods["attn_out"][i]),
                mods["attn_out"][i].bias.detach(),
                mods["ln_attn"][i],
                a.weight(mods["ffn_in"][i]),
                mods["ffn_in"][i].bias.detach(),
                mods["ffn_act"][i],
                a.weight(mods["ffn_out"][i]),
                mods["ffn_out"][i].bias.detach(),
                mods["ln_ffn"][i],
                lm.d_v**-0.5,
            )
        )
    return layers


@dataclass
class _LayerState:
    """Per-sentence primal quantities of one layer that the tangent pass needs (n = d_s)."""

    q: torch.Tensor  # (H, n, d_v)
    k: torch.Tensor
    v: torch.Tensor
    a: torch.Tensor  # (H, n, n) attention probabilities
    ctx: torch.Tensor  # (H, n, d_v) primal context A V
    xhat1: torch.Tensor  # (n, 1, d) normalised LN1 input
    s1: torch.Tensor  # (n, 1, d) γ1 / σ1
    dact: torch.Tensor  # (n, 1, d_ff) activation derivative at z
    xhat2: torch.Tensor
    s2: torch.Tensor
    P: torch.Tensor | None = None  # (n, d, d) the folded position-wise Jacobian
    qk: torch.Tensor | None = None  # (2H·n, d) the score rows of :func:`_score_rows`


def _score_rows(ly: _PostLNLayer, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(2H·n, d): scaling·(W_q^hᵀ k_t^h) for every (h, t), then scaling·(W_k^hᵀ q_p^h) for every (h, p).

    The tangent has no bias, so dq_pb^h·k_t^h = t_pb·(W_q^hᵀ k_t^h) and q_p^h·dk_tb^h = t_tb·(W_k^hᵀ q_p^h):
    one product of the tangents with these rows gives both score-tangent terms without Q/K tangents.
    """
    H, n, d_v = q.shape
    d = H * d_v
    wq, wk = ly.wqkv[: 2 * d].view(2, H, d_v, d).unbind(0)  # W_q^h, W_k^h: (H, d_v, d)
    return torch.cat([k @ wq, q @ wk]).reshape(2 * H * n, d).mul_(ly.scaling)


def _ln_parts(ln: nn.LayerNorm, y: torch.Tensor):
    mu = y.mean(-1, keepdim=True)
    sigma = (y.var(-1, unbiased=False, keepdim=True) + ln.eps).sqrt()
    xhat = (y - mu) / sigma
    return xhat, ln.weight / sigma  # s = γ / σ, per position and coordinate


def _ln_tangent(r: torch.Tensor, xhat: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """LayerNorm's Jacobian applied to tangents r (n, B, d): s ⊙ (r − mean(r) − x̂ mean(r ⊙ x̂))."""
    return s * (r - r.mean(-1, keepdim=True) - xhat * (r * xhat).mean(-1, keepdim=True))


def _fold(xhat1, s1, w1, dact, w2, xhat2, s2, max_rows: int = 1 << 13) -> torch.Tensor:
    """P_p = C1 diag(s1) (I + W1ᵀ diag(act'(z_p)) W2ᵀ) C2 diag(s2) for every position p, (n, d, d).

    C = I − 11ᵀ/d − x̂x̂ᵀ/d is LayerNorm's centring projector (symmetric), so both LN factors are rank-2
    updates and scalings, O(d²) per position; the FFN product is one GEMM (n·d, d_ff) @ (d_ff, d),
    done in slices of positions to bound the (slice·d, d_ff) intermediate.
    """
    n, _, d = xhat1.shape
    w1t, w2t = w1.T.contiguous(), w2.T  # (d, d_ff) contiguous so that the scaled copy reshapes for free
    per = min(n, max(1, max_rows // d))
    d_ff = w1t.shape[1]
    F = torch.empty(n, d, d, dtype=w1.dtype, device=w1.device)
    scaled = torch.empty(per, d, d_ff, dtype=w1.dtype, device=w1.device)  # reused across slices
    for s in range(0, n, per):
        e = min(n, s + per)
        buf = scaled[: e - s]
        torch.mul(w1t.unsqueeze(0), dact[s:e], out=buf)  # W1ᵀ diag(act'(z_p)) for each position p
        torch.mm(buf.view(-1, d_ff), w2t, out=F[s:e].view(-1, d))
    F.diagonal(dim1=-2, dim2=-1).add_(1.0)
    # diag(s1) F scales rows; C X = X − U (Uᵀ X)/d and X C = X − (X U) Uᵀ/d with U = [1, x̂] (d x 2).
    Y = F.mul_(s1.transpose(1, 2))
    ones = torch.ones(n, d, 1, dtype=Y.dtype, device=Y.device)
    u1 = torch.cat([ones, xhat1.transpose(1, 2)], 2)  # (n, d, 2)
    Y.baddbmm_(u1, u1.transpose(1, 2) @ Y, alpha=-1.0 / d)  # in place: no second (n, d, d) buffer
    u2 = torch.cat([ones, xhat2.transpose(1, 2)], 2)
    Y.baddbmm_(Y @ u2, u2.transpose(1, 2), alpha=-1.0 / d)
    return Y.mul_(s2)  # scale columns by s2


def _folded_primal(lm: LoadedModel, layers: list[_PostLNLayer], inp: Inputs, fold: bool, rows: list[bool]):
    """The post-LN forward pass from x, keeping what the tangent pass needs (the score rows in the layers
    where ``rows`` says so); returns (states, rel_err) where rel_err is the worst relative difference from
    the model's own hidden states."""
    H = lm.n_heads
    h = inp.x
    n, d = h.shape
    d_v = d // H
    states, worst = [], 0.0
    for li, ly in enumerate(layers):
        qkv = h @ ly.wqkv.T + ly.bqkv
        q, k, v = qkv.reshape(n, 3, H, d_v).permute(1, 2, 0, 3)  # each (H, n, d_v)
        a = torch.softmax((q @ k.transpose(1, 2)) * ly.scaling, dim=-1)
        ctx = a @ v
        pre1 = ctx.transpose(0, 1).reshape(n, d) @ ly.wo.T + ly.bo + h
        u = ly.ln1(pre1)
        z = u @ ly.w1.T + ly.b1
        with torch.enable_grad():  # element-wise derivative of the model's own activation module
            zz = z.detach().requires_grad_(True)
            y = ly.act(zz)
            (dact,) = torch.autograd.grad(y.sum(), zz)
        pre2 = y.detach() @ ly.w2.T + ly.b2 + u
        h = ly.ln2(pre2)
        xhat1, s1 = _ln_parts(ly.ln1, pre1)
        xhat2, s2 = _ln_parts(ly.ln2, pre2)
        st = _LayerState(
            q, k, v, a, ctx, xhat1.unsqueeze(1), s1.unsqueeze(1), dact.unsqueeze(1), xhat2.unsqueeze(1), s2.unsqueeze(1)
        )
        if fold:
            st.P = _fold(st.xhat1, st.s1, ly.w1, st.dact, ly.w2, st.xhat2, st.s2)
        if rows[li]:
            st.qk = _score_rows(ly, q, k)
        states.append(st)
        ref = inp.hidden[li + 1]
        worst = max(worst, float((h - ref).norm() / ref.norm().clamp_min(1e-30)))
    return states, worst


def _should_fold(n_dirs: int, d: int, d_ff: int) -> bool:
    """Fold when precomputing P (n·d²·d_ff MACs) is cheaper than the FFN on every tangent row
    (n_dirs·n·(2·d·d_ff − d²) MACs saved)."""
    return n_dirs * (2 * d * d_ff - d * d) > d * d * d_ff


def _projected_scores(
    t: torch.Tensor,
    ly: _PostLNLayer,
    st: _LayerState,
    buf: torch.Tensor,
    one_row: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V tangents (H, n_t, B·d_v) and score tangents (H, n_p·B, n_t) of tangents t (n, B, d) from their
    Q/K/V projections, written into ``buf``. ``one_row`` = (pos, cols, vec) in the first layer, where a
    direction is non-zero at one position only: its Q/K/V tangents are then one row each."""
    n, b, d = t.shape
    H, _, d_v = st.q.shape
    qkv = buf[: n * b * 3 * d].view(n, b, 3 * d)
    if one_row is not None:
        pos, cols, vec = one_row
        qkv.zero_()
        qkv[pos, cols] = vec @ ly.wqkv.T
    else:
        torch.mm(t.view(n * b, d), ly.wqkv.T, out=qkv.view(n * b, 3 * d))
    q5 = qkv.view(n, b, 3, H, d_v)
    dq = q5[:, :, 0].permute(2, 0, 1, 3).reshape(H, n * b, d_v)  # rows (p, b), a view
    dv = q5[:, :, 2].permute(2, 0, 1, 3).reshape(H, n, b * d_v)  # (H, n_t, B·d_v)
    # score tangent dS[h, p, b, t] = (dq_pb·k_t + q_p·dk_tb) · scaling, laid out (H, n_p·B, n_t).
    # The q·dk term comes out transposed; for short sentences adding it through a strided
    # view is faster than making dk (H, d_v, B·n_t) contiguous for one matmul (measured).
    if n <= _STRIDED_MAX_N:
        dk = q5[:, :, 1].permute(2, 0, 1, 3).reshape(H, n * b, d_v)  # rows (t, b), a view
        ds = dq @ st.k.transpose(1, 2)
        ds.reshape(H, n, b, n).add_((dk @ st.q.transpose(1, 2)).reshape(H, n, b, n).permute(0, 3, 2, 1))
        ds.mul_(ly.scaling)
    else:
        dk = q5[:, :, 1].permute(2, 3, 1, 0).reshape(H, d_v, b * n)  # columns (b, t), a copy
        ds = (st.q @ dk).reshape(H, n * b, n)  # q_p·dk_tb, already in (p, b, t) order
        ds.baddbmm_(dq, st.k.transpose(1, 2), beta=ly.scaling, alpha=ly.scaling)
    return dv, ds


def _precomputed_scores(
    t: torch.Tensor, ly: _PostLNLayer, qk: torch.Tensor, buf: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """As :func:`_projected_scores`, but only V is projected: the score tangent is one product with the
    score rows ``qk`` of :func:`_score_rows`, (n·B, 2H·n) holding scaling·dq·k indexed (p, b, h, t), then
    scaling·q·dk indexed (t, b, h, p), added into (h, p, b, t) order."""
    n, b, d = t.shape
    H = qk.shape[0] // (2 * n)
    d_v, nb = d // H, n * b
    v, sc = buf[: nb * (d + 2 * H * n)].split([nb * d, nb * 2 * H * n])
    torch.mm(t.view(nb, d), ly.wqkv[2 * d :].T, out=v.view(nb, d))
    torch.mm(t.view(nb, d), qk.T, out=sc.view(nb, 2 * H * n))
    dv = v.view(n, b, H, d_v).permute(2, 0, 1, 3).reshape(H, n, b * d_v)  # (H, n_t, B·d_v), a copy
    dqk, qdk = sc.view(n, b, 2, H, n).unbind(2)
    ds = torch.empty(H, n, b, n, dtype=t.dtype, device=t.device)
    torch.add(dqk.permute(2, 0, 1, 3), qdk.permute(2, 3, 1, 0), out=ds)
    return dv, ds.view(H, n * b, n)


def _first_layer_scores(
    ly: _PostLNLayer, st: _LayerState, pos: torch.Tensor, cols: torch.Tensor, vec: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """As :func:`_projected_scores` in the first layer, where direction b is non-zero at position pos_b
    only: its Q/K/V tangents are one row, so its dq·k term is one row (p = pos_b) and its q·dk term one
    column (t = pos_b) of the score tangent, products over B rows instead of n·B (faster than
    :func:`_projected_scores` there at every length, the more so the longer the sentence)."""
    b, d = vec.shape
    H, n, d_v = st.q.shape
    dq, dk, dv1 = (vec @ ly.wqkv.T).view(b, 3, H, d_v).permute(1, 2, 0, 3)  # each (H, B, d_v)
    dv = torch.zeros(H, n, b, d_v, dtype=vec.dtype, device=vec.device)
    ds = torch.zeros(H, n, b, n, dtype=vec.dtype, device=vec.device)
    dv[:, pos, cols] = dv1
    ds[:, pos, cols, :] = torch.bmm(dq, st.k.transpose(1, 2)).mul_(ly.scaling)  # (H, B, n_t)
    ds[:, :, cols, pos] += torch.bmm(st.q, dk.transpose(1, 2)).mul_(ly.scaling)  # (H, n_p, B)
    return dv.view(H, n, b * d_v), ds.view(H, n * b, n)


def _should_precompute(n: int, d: int, H: int) -> bool:
    """Take the score tangent from the score rows (2·d·H·n MACs per tangent row, plus d² for V) rather
    than from projected Q/K tangents (3d² for Q/K/V, plus 2·n·d for the two score products) where that is
    fewer operations: n·(H − 1) < d. The times follow the operation counts: on the embedded model (d = 384,
    H = 12) the two paths take about as long where the counts meet, n = d / (H − 1) ≈ 35."""
    return n * (H - 1) < d


def _score_row_layers(n: int, d: int, H: int, L: int, scores: str | None) -> list[bool]:
    """Which layers take the score tangent from score rows: never the first (:func:`_first_layer_scores`
    is cheaper there), the others where :func:`_should_precompute` says so, or as ``scores`` forces."""
    if scores not in (None, "project", "precomputed"):
        raise ValueError(f"scores must be None, 'project' or 'precomputed', got {scores!r}")
    rest = _should_precompute(n, d, H) if scores is None else scores == "precomputed"
    return [False] + [rest] * (L - 1)


def folded_S(
    lm: LoadedModel,
    inp: Inputs,
    dirs: Directions,
    chunk: int | None,
    layers: list[_PostLNLayer],
    fold: bool | None = None,
    scores: str | None = None,
) -> torch.Tensor | None:
    """(L+1, n, n) float64 squared block norms S on the CPU by the hand-written batched forward-mode pass;
    None if its primal pass disagrees with the model.

    ``fold``: fold LN1, FFN and LN2 into P_p (None: where :func:`_should_fold` says it pays). ``scores``:
    how the layers get their score tangent. "project": from Q/K tangents in every layer, with dense score
    products in the first (the path before score rows, kept as a reference). Otherwise the first layer's
    score products are one row per direction (:func:`_first_layer_scores`) and the others use the score
    rows of :func:`_score_rows` ("precomputed") or projected Q/K tangents, as :func:`_should_precompute`
    says (None).
    """
    n = inp.x.shape[0]
    d, H = lm.d_model, lm.n_heads
    d_ff = layers[0].w1.shape[0]
    if fold is None:
        fold = _should_fold(dirs.total, d, d_ff)
    rows = _score_row_layers(n, d, H, len(layers), scores)
    first_one_row = scores != "project"
    with torch.no_grad():
        states, err = _folded_primal(lm, layers, inp, fold, rows)
        if err > PRIMAL_TOL:
            warnings.warn(
                f"folded HTA: own forward pass differs from {lm.name}'s hidden states by {err:.1e} "
                f"(> {PRIMAL_TOL}); using the generic forward-mode path instead",
                stacklevel=3,
            )
            return None
        dev, dt = inp.x.device, inp.x.dtype
        S = torch.zeros(len(layers) + 1, n, n, dtype=torch.float64, device=dev)
        B = auto_chunk(n, chunk)
        # The Q/K/V (or V and score) tangents are the largest tensors of a chunk; one buffer per sentence,
        # reused, spares the allocator a fresh (page-faulting) block per layer on the CPU.
        width = max([d + 2 * H * n if r else 3 * d for r in rows[1:]] + [0 if first_one_row else 3 * d])
        buf = torch.empty(n * min(B, dirs.count) * width, dtype=dt, device=dev)
        for start in range(0, dirs.count, B):
            stop = min(start + B, dirs.count)
            b = stop - start
            pos, vec = dirs.chunk(start, stop, dev, dt)
            cols = torch.arange(b, device=dev)
            # Layer 0: hidden[0] is the encoder input; its block norms are those of the direction itself.
            S[0].index_put_((pos, pos), vec.pow(2).sum(-1).double() * dirs.weight, accumulate=True)
            # Tangents live position-major, (n, B, d): every position-wise op is then a plain matmul and
            # the folded P_p apply as one batched matmul over positions without transposes.
            t = torch.zeros(n, b, d, dtype=dt, device=dev)
            t[pos, cols] = vec
            for li, (ly, st) in enumerate(zip(layers, states)):
                t = _through_layer(ly, st, t, buf, (pos, cols, vec) if li == 0 else None, first_one_row)
                sq = torch.linalg.vector_norm(t, dim=-1).square_()  # (n_i, B)
                S[li + 1].index_add_(1, pos, sq.double(), alpha=dirs.weight)
            del t, sq  # before the next chunk allocates its own: two alive at once would raise the peak
    return S.cpu()


def _through_layer(
    ly: _PostLNLayer,
    st: _LayerState,
    t: torch.Tensor,
    buf: torch.Tensor | None,
    one_row: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    first_one_row: bool,
) -> torch.Tensor:
    """Tangents t (n, B, d) of a layer's input carried through the layer: its output's tangents (n, B, d);
    t itself is overwritten (it becomes the residual sum). ``one_row`` = (pos, cols, vec) where every
    direction is non-zero at one position of this layer's input (the first layer of :func:`folded_S`, every
    layer of :func:`folded_layer_S`); with ``first_one_row`` its score products are then one row
    (:func:`_first_layer_scores`, which needs no ``buf``)."""
    n, b, d = t.shape
    H, _, d_v = st.q.shape
    if one_row is not None and first_one_row:
        dv, ds = _first_layer_scores(ly, st, *one_row)
    elif st.qk is not None:
        dv, ds = _precomputed_scores(t, ly, st.qk, buf)
    else:
        dv, ds = _projected_scores(t, ly, st, buf, one_row)
    ads = ds.reshape(H, n, b, n).mul_(st.a.unsqueeze(2)).reshape(H, n * b, n)  # A ⊙ dS
    # softmax tangent times V without forming dA: dA V = (A⊙dS) V − rowsum(A⊙dS) ⊙ (A V)
    dctx = (st.a @ dv).reshape(H, n * b, d_v).baddbmm_(ads, st.v)  # A dV + (A⊙dS) V
    dctx = dctx.reshape(H, n, b, d_v)
    dctx -= ads.sum(-1).reshape(H, n, b, 1) * st.ctx.unsqueeze(2)
    del dv, ds, ads  # free before the next allocations: this bounds the peak
    # output projection + residual, into t's own memory: no second tangent buffer is alive
    r = t.view(n * b, d).addmm_(dctx.permute(1, 2, 0, 3).reshape(n * b, d), ly.wo.T).view(n, b, d)
    del dctx, t
    if st.P is not None:
        return torch.bmm(r, st.P)  # (n, B, d) @ (n, d, d): LN1, FFN, residual, LN2 at once
    du = _ln_tangent(r, st.xhat1, st.s1)
    df = ((du @ ly.w1.T) * st.dact) @ ly.w2.T
    del r
    return _ln_tangent(df + du, st.xhat2, st.s2)


def folded_layer_S(
    lm: LoadedModel, inp: Inputs, dirs: Directions, chunk: int | None, layers: list[_PostLNLayer]
) -> torch.Tensor | None:
    """(L+1, n, n) float64 squared block norms of each layer alone on the CPU, S[l, i, j] =
    ||∂e_i^l / ∂e_j^{l-1}||_F² (S[0] as :func:`folded_S`'s: the directions themselves); None if the primal
    pass disagrees with the model.

    The folded pass with every layer's tangent starting one-hot at that layer's own input (the primal states
    are the model's own, checked as :func:`folded_S` checks them), so every layer takes the first layer's
    one-row path: per direction about the arithmetic of :func:`folded_S`'s pass through all layers.
    """
    n, d = inp.x.shape[0], lm.d_model
    fold = _should_fold(dirs.total, d, layers[0].w1.shape[0])
    with torch.no_grad():
        states, err = _folded_primal(lm, layers, inp, fold, [False] * len(layers))
        if err > PRIMAL_TOL:
            warnings.warn(
                f"folded one-layer HTA: own forward pass differs from {lm.name}'s hidden states by {err:.1e} "
                f"(> {PRIMAL_TOL}); using the generic forward-mode path instead",
                stacklevel=3,
            )
            return None
        dev, dt = inp.x.device, inp.x.dtype
        S = torch.zeros(len(layers) + 1, n, n, dtype=torch.float64, device=dev)
        B = auto_chunk(n, chunk)
        for start in range(0, dirs.count, B):
            stop = min(start + B, dirs.count)
            pos, vec = dirs.chunk(start, stop, dev, dt)
            cols = torch.arange(stop - start, device=dev)
            S[0].index_put_((pos, pos), vec.pow(2).sum(-1).double() * dirs.weight, accumulate=True)
            for li, (ly, st) in enumerate(zip(layers, states)):
                t = torch.zeros(n, stop - start, d, dtype=dt, device=dev)
                t[pos, cols] = vec
                t = _through_layer(ly, st, t, None, (pos, cols, vec), True)
                S[li + 1].index_add_(1, pos, torch.linalg.vector_norm(t, dim=-1).square_().double(), alpha=dirs.weight)
                del t
    return S.cpu()


def folded_flops(lm: LoadedModel, n: int, n_dirs: int, fold: bool = True, scores: str | None = None) -> float:
    """Floating-point operations of the folded tangent pass on the path :func:`folded_S` takes with the same
    ``fold`` and ``scores`` (the work done, for GFLOP/s figures).

    Per direction, position and layer: output projection d², folded P_p d² (or 2·d·d_ff unfolded), the
    attention-weighted sums 2·n·d, and V with the score tangent: projected, 3d² + 2·n·d, or from score rows,
    d² + 2·d·H·n. In the first layer the projections are one row per direction (3d²/n per position), and
    so are the score products (2·d per position) unless ``scores="project"``. Times two for multiply-add;
    plus per sentence the folding, n·d²·d_ff per layer, and the score rows, 2·n·d² per layer that uses them.
    """
    d, d_ff, H, L = lm.d_model, lm.d_ff, lm.n_heads, lm.n_layers
    rows = _score_row_layers(n, d, H, L, scores)
    ffn = d * d if fold else 2 * d * d_ff
    per_row = L * (d * d + ffn + 2 * n * d) + 3 * d * d / n + (2 * n * d if scores == "project" else 2 * d)
    per_row += sum(d * d + 2 * d * H * n if r else 3 * d * d + 2 * n * d for r in rows[1:])
    per_sentence = (L * n * d * d * d_ff if fold else 0) + sum(rows) * 2 * n * d * d
    return 2.0 * (n_dirs * n * per_row + per_sentence)


def peak_bytes(lm: LoadedModel, n: int, chunk: int | None = None, method: str = "folded") -> int:
    """The memory bounds, in bytes, for a sentence of n tokens: this module's docstring for ``method="folded"``,
    :mod:`.generic`'s for ``method="generic"``."""
    B = auto_chunk(n, chunk)
    d, H, L = lm.d_model, lm.n_heads, lm.n_layers
    d_ff = lm.d_ff
    out = 8 * (L + 1) * n * n
    if method == "folded":
        score_rows = 8 * H * n * d * sum(_score_row_layers(n, d, H, L, None))
        state = 4 * L * n * (d * d + 8 * d + d_ff + 2 * H * n) + score_rows
        working = 4 * B * n * (12 * d + 3 * H * n)
        folding = 4 * min(n, max(1, 8192 // d)) * d * d_ff
        return state + max(working, folding) + out
    return 4 * B * n * ((L + 1) * d + 3 * d_ff + 4 * H * n) + out
