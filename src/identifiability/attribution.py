"""Hidden Token Attribution (paper section 5): how much each input token contributes to each hidden token.

For layer l, hidden position i and input position j the paper's attribution is the Frobenius norm of a
d x d Jacobian block, ĉ^l_{i,j} = ||∂e_i^l / ∂x_j||_F, normalised over j: c^l_{i,j} = ĉ^l_{i,j} / Σ_k ĉ^l_{i,k}.
x is the embedding layer's output and e^l the hidden states (``hidden[0] = x``). Everything here computes
S[l, i, j] = ĉ²  (squared block norms) for all layers at once; :func:`contributions` turns S into c.

Why forward mode. An exact answer must push n = d_s·d input directions (one per coordinate of x) through
the network, or d_s·d output directions per layer back through it. Forward mode (a Jacobian-vector
product, JVP) carries one input direction through *all* layers in one sweep, so one pass over the n
directions yields every layer's blocks; reverse mode needs a pass per layer, position and output
coordinate (cost ∝ L(L+1)/2). Each chunk of directions is reduced to sums of squares at once, so memory
never grows with n.

Three exact engines and one estimator, all returning the same S (the project's performance notes,
shared/notes/performance.md, hold the measurements that chose them). Everything runs on ``lm.device``
(a GPU too); results come back on the CPU:

- :func:`hta_naive`: one ``autograd.grad`` per (layer, position, output coordinate). The obvious research
  script, kept as the reference the tests compare against on tiny inputs.
- ``method="generic"``: ``torch.func.jvp`` under ``vmap`` over chunks of one-hot tangents, the model run
  "from x" by a forward hook on its embedding module. Works for every architecture in the registry
  (GPT-2 included: causal masks and pre-LN are just part of the model it differentiates).
- ``method="folded"``: a hand-written batched forward-mode pass for post-LayerNorm BERT-style layers
  (BERT, RoBERTa, ELECTRA, DistilBERT). Everything after the attention mixing acts on a tangent position by
  position, through one d x d matrix per position, P_p = J_LN1 (I + W1ᵀ diag(act'(z_p)) W2ᵀ) J_LN2
  (row-vector convention), precomputed once per sentence; the tangent then costs about 10d² FLOPs per
  position and layer instead of about 24d². In the first layer a direction is non-zero at one position, so
  its Q/K/V products are one row. Chosen automatically where it applies; its own primal pass is checked
  against the model's hidden states before any tangent is pushed, and it falls back to the generic path
  (with a warning) when they disagree.
- ``mode="estimate"``: Hutchinson's trace estimator per input token. ||J||_F² = E ||J v||² for a random v
  with E[v vᵀ] = I, so m random directions at position j (instead of d one-hot ones) estimate S[:, :, j]
  for every layer and hidden position at once, d/m times cheaper. Random orthonormal probes scaled by √d
  (the default) have lower variance than Gaussian ones, and are exact when m = d. Its relative variance
  grows as a block's effective rank falls: on the embedded MiniLM the blocks between different tokens
  have effective rank 10–40 (median 12–17 per layer), and 16 probes per token give a median relative
  error of c of about 3.2% (95th percentile about 11%), falling roughly like 1/√m: 32 probes 1.9–2.4%,
  64 probes 1.6%, 128 probes 0.95% (p95 3.2%) at d_s = 16 and 32 (benchmark). A median of 1% therefore
  costs a third of the exact pass, not a twentieth. Deflating a per-token dominant input subspace
  (Hutch++-style) did not help at equal cost in a simulation on exact blocks: the subspace that would help
  differs per (layer, hidden token), and finding it needs reverse passes per input token.

Memory (float32, B = tangent directions per chunk, n = d_s, H heads, d width, d_ff FFN width, L layers):
- folded: the per-sentence state, 4·L·n·(d² + 8d + d_ff + 2H·n) bytes (the P_p dominate: 4·L·n·d²),
  plus the larger of the chunk working set, at most 4·B·n·(12d + 3H·n) bytes (about 8d + H·n floats per
  tangent row are alive at once; the rest is margin), and the folding's temporary while the state is
  built, 4·min(n, 8192/d)·d·d_ff bytes; plus the output S, 8·(L+1)·n² bytes. (The allocator and the BLAS
  library add their own buffers on top: on the embedded model the resident-set growth of one exact pass in a
  fresh process measured 178, 310–335, 367–449 and 692 MB at d_s = 16, 32, 64, 128 against bounds of 218,
  292, 441 and 743 MB, i.e. up to about 15% over at d_s = 32 and 64, where glibc's per-thread arenas keep
  freed chunks resident. The benchmark reports its own measurement next to the bound.)
- generic: at most about 4·B·n·((L+1)·d + 3·d_ff + 4·H·n) bytes per chunk (the stacked tangent outputs
  plus one layer's widest intermediates), on top of one ordinary forward pass.
``chunk`` = B; by default B·n ≈ 8,192 tangent rows, which caps the working set at about 160 MB for a
MiniLM-size model (d = 384) at any sentence length as long as the n² attention terms stay small (n ≤ 64;
at n = 128 about 0.35 GB). :func:`peak_bytes` evaluates these bounds; the benchmark measures the peak.
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch
from torch import nn
from tqdm import tqdm

from .loaded_model import LoadedModel
from .trace import SentenceTrace, forward, from_x, tokenize

DEFAULT_ROWS = 8192  # tangent rows (directions x positions) per chunk; see the module docstring
PRIMAL_TOL = 1e-4  # the folded pass's own forward must match the model's hidden states this closely
_STRIDED_MAX_N = 48  # up to this d_s the q·dk score term is added through a strided view (measured faster)


# --------------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------------


def contributions(S: torch.Tensor) -> torch.Tensor:
    """Normalised contributions c = √S / Σ_j √S.

    Args:
        S: (..., d_s, d_s) squared block norms S[..., i, j] = ||∂e_i/∂x_j||_F².
    Returns:
        c with the same shape: non-negative, each row (fixed i) sums to 1.
    """
    norms = S.clamp_min(0).sqrt()
    total = norms.sum(-1, keepdim=True)
    return norms / total.clamp_min(torch.finfo(norms.dtype).tiny)


@dataclass
class HTAResult:
    """Hidden Token Attribution of one sentence.

    Attributes:
        text: the sentence.
        tokens: its d_s tokens (special tokens included).
        S: (L+1, d_s, d_s) float64 squared Frobenius norms ||∂e_i^l/∂x_j||_F² (an unbiased estimate of
            them in estimate mode); layer 0 is the input itself (S[0] is diagonal).
        method: "naive", "generic" or "folded" (the engine that produced S).
        mode: "exact" or "estimate".
        probes: probes per input token in estimate mode, else None.
        seconds: wall time of the computation.
        special: d_s flags, True for the tokenizer's special tokens ([CLS], [SEP], <s>, ...).
    """

    text: str
    tokens: list[str]
    S: torch.Tensor
    method: str
    mode: str = "exact"
    probes: int | None = None
    seconds: float = 0.0
    special: list[bool] = field(default_factory=list)

    @property
    def c(self) -> torch.Tensor:
        """(L+1, d_s, d_s) normalised contributions: c[l, i, j] is input token j's share in hidden token i."""
        return contributions(self.S)

    @property
    def norms(self) -> torch.Tensor:
        """(L+1, d_s, d_s) raw block norms ĉ = √S."""
        return self.S.clamp_min(0).sqrt()

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


# --------------------------------------------------------------------------------------------------
# running the model "from x"
# --------------------------------------------------------------------------------------------------


@dataclass
class _Inputs:
    text: str
    tokens: list[str]
    enc: dict  # input_ids, attention_mask: (1, n) on the model's device
    x: torch.Tensor  # (n, d) the x module's output, the input of the first layer
    hidden: torch.Tensor  # (L+1, n, d) the model's hidden states (hidden[0] = the encoder's input)
    special: list[bool]


def _prepare(lm: LoadedModel, item: str | SentenceTrace, max_tokens: int | None = None) -> _Inputs:
    """Tokenise (or take a trace's ids), run the model once, keep x and the hidden states."""
    if isinstance(item, SentenceTrace):
        ids, text = item.input_ids.reshape(1, -1), item.text
    elif isinstance(item, str):
        ids, text = tokenize(lm, [item], max_tokens)["input_ids"], item
    else:
        raise TypeError(f"expected a sentence (str) or a SentenceTrace, got {type(item).__name__}")
    f = forward(lm, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    hidden = torch.stack([h[0] for h in f.out.hidden_states])
    special_ids = set(lm.tokenizer.all_special_ids)
    return _Inputs(text, lm.tokenizer.convert_ids_to_tokens(ids[0].tolist()), f.enc, f.x[0], hidden,
                   [int(i) in special_ids for i in ids[0].tolist()])


# --------------------------------------------------------------------------------------------------
# tangent directions: exact (one-hot) or random probes, each non-zero at one input position
# --------------------------------------------------------------------------------------------------


@dataclass
class _Directions:
    """N tangent directions of x, direction k non-zero only at position ``pos[k]`` with value ``vec[k]``.

    S[:, :, pos[k]] accumulates ``weight · ||J v_k||²``; exact mode uses all n·e one-hot vectors
    (weight 1), estimate mode m random probes per position (weight 1/m).
    """

    n: int
    e: int
    probes: int | None = None  # None: exact
    probe: str = "orthonormal"
    seed: int = 0
    limit: int | None = None  # only the first ``limit`` directions (benchmarks time a sample of chunks)
    _vec: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.probes is not None:
            if self.probes < 1:
                raise ValueError(f"probes must be at least 1, got {self.probes}")
            self._vec = _random_probes(self.n, self.e, self.probes, self.probe, self.seed)  # (n, m, e)

    @property
    def total(self) -> int:
        return self.n * (self.e if self.probes is None else self.probes)

    @property
    def count(self) -> int:
        return self.total if self.limit is None else min(self.limit, self.total)

    @property
    def weight(self) -> float:
        return 1.0 if self.probes is None else 1.0 / self.probes

    def chunk(self, start: int, stop: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(pos (B,), vec (B, e)) for directions start..stop-1 (position-major order)."""
        k = torch.arange(start, stop)
        if self.probes is None:
            pos, a = k // self.e, k % self.e
            vec = torch.zeros(stop - start, self.e, dtype=dtype)
            vec[torch.arange(stop - start), a] = 1.0
        else:
            pos = k // self.probes
            vec = self._vec.reshape(-1, self.e)[start:stop].to(dtype)
        return pos.to(device), vec.to(device)


def _random_probes(n: int, e: int, m: int, probe: str, seed: int) -> torch.Tensor:
    """(n, m, e) probe vectors with E[v vᵀ] = I: Gaussian, or orthonormal columns scaled by √e (blocks
    of at most e mutually orthogonal probes; independent blocks when m > e)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, m, e, generator=g, dtype=torch.float64)
    if probe == "gaussian":
        return z.float()
    if probe != "orthonormal":
        raise ValueError(f"probe must be 'orthonormal' or 'gaussian', got {probe!r}")
    blocks = []
    for s in range(0, m, e):
        q, r = torch.linalg.qr(z[:, s:s + e].transpose(1, 2))  # (n, e, k) orthonormal columns
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(1)  # Haar-distributed
        blocks.append(q.transpose(1, 2))
    return (torch.cat(blocks, 1) * math.sqrt(e)).float()


def _auto_chunk(n: int, chunk: int | None) -> int:
    return max(1, int(chunk) if chunk else DEFAULT_ROWS // max(n, 1))


# --------------------------------------------------------------------------------------------------
# 1. the naive reverse-mode reference
# --------------------------------------------------------------------------------------------------


def hta_naive(lm: LoadedModel, text_or_trace: str | SentenceTrace, max_tokens: int | None = None,
              rows: Sequence[tuple[int, int]] | None = None) -> HTAResult:
    """Exact S by reverse mode, one ``autograd.grad`` per (layer, hidden position, output coordinate).

    (L+1)·d_s·d backward passes (the last layers' ones through the whole network): minutes to an hour
    per sentence on a real model. This is the reference that the fast engines are tested against.

    Args:
        rows: only these (layer, hidden position) rows of S (the others are NaN), to check a real model
            in seconds instead of an hour.
    """
    t0 = time.perf_counter()
    inp = _prepare(lm, text_or_trace, max_tokens)
    hs, x = _graph_from_x(lm, inp)
    n_layers, n, d = len(hs), inp.x.shape[0], hs[0].shape[-1]
    if rows is None:
        rows = [(layer, i) for layer in range(n_layers) for i in range(n)]
        S = torch.zeros(n_layers, n, n, dtype=torch.float64)
    else:
        S = torch.full((n_layers, n, n), float("nan"), dtype=torch.float64)
    for layer, i in rows:
        S[layer, i] = 0.0
        for k in range(d):
            (g,) = torch.autograd.grad(hs[layer][0, i, k], x, retain_graph=True)
            S[layer, i] += g.pow(2).sum(-1).double().cpu()
    return HTAResult(inp.text, inp.tokens, S, "naive", seconds=time.perf_counter() - t0, special=inp.special)


def _graph_from_x(lm: LoadedModel, inp: _Inputs):
    x = inp.x.detach().clone().requires_grad_(True)
    with from_x(lm) as slot, torch.enable_grad():
        slot["x"] = x
        hs = lm.model(**inp.enc, output_hidden_states=True).hidden_states
    return hs, x


def naive_seconds(lm: LoadedModel, text_or_trace: str | SentenceTrace, per_layer: int = 24, seed: int = 0) -> float:
    """Extrapolated wall time of :func:`hta_naive` from ``per_layer`` timed backward passes per layer.

    A full naive run on a real model takes tens of minutes; the passes of one layer all cost about the
    same (the same graph from that layer down), so the median time of a sample of them per layer times
    the number of passes estimates it (the median, because a shared machine adds rare long stalls).
    """
    inp = _prepare(lm, text_or_trace)
    hs, x = _graph_from_x(lm, inp)
    n, d = inp.x.shape[0], hs[0].shape[-1]
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for layer in range(len(hs)):
        picks = torch.randint(0, n * d, (per_layer,), generator=g).tolist()
        times = []
        for p in picks:
            t0 = time.perf_counter()
            (gr,) = torch.autograd.grad(hs[layer][0, p // d, p % d], x, retain_graph=True)
            gr.pow(2).sum(-1).double().cpu()
            times.append(time.perf_counter() - t0)
        total += sorted(times)[len(times) // 2] * n * d
    return total


# --------------------------------------------------------------------------------------------------
# 2. generic forward mode: torch.func.jvp under vmap, any architecture
# --------------------------------------------------------------------------------------------------


def _generic_S(lm: LoadedModel, inp: _Inputs, dirs: _Directions, chunk: int | None) -> torch.Tensor:
    from torch.func import jvp, vmap

    n, e = inp.x.shape
    B = _auto_chunk(n, chunk)
    S = torch.zeros(inp.hidden.shape[0], n, n, dtype=torch.float64, device=inp.x.device)
    x = inp.x.detach()
    # no_grad: forward AD does not need it, and the parameters would otherwise record a reverse graph.
    with torch.no_grad(), from_x(lm) as slot:

        def hidden_of(xx):
            slot["x"] = xx
            out = lm.model(**inp.enc, output_hidden_states=True)
            return torch.stack([h[0] for h in out.hidden_states])  # (L+1, n, d)

        def sq_norms(t):  # one tangent (n, e) -> ||J_{:, :, pos} t||² for every layer and position
            return jvp(hidden_of, (x,), (t,))[1].pow(2).sum(-1)  # (L+1, n)

        batched = vmap(sq_norms)
        for start in range(0, dirs.count, B):
            stop = min(start + B, dirs.count)
            pos, vec = dirs.chunk(start, stop, x.device, x.dtype)
            t = torch.zeros(stop - start, n, e, dtype=x.dtype, device=x.device)
            t[torch.arange(stop - start, device=x.device), pos] = vec
            sq = batched(t)  # (B, L+1, n)
            S.index_add_(2, pos, sq.permute(1, 2, 0).double(), alpha=dirs.weight)
    return S.cpu()


# --------------------------------------------------------------------------------------------------
# 3. the folded forward-mode pass for post-LN BERT-style layers
# --------------------------------------------------------------------------------------------------

# Element-wise activations the folded pass accepts (its derivative is taken by autograd element-wise).
_ELEMENTWISE_ACTS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "quick_gelu",
                     "gelu_accurate", "relu", "silu", "swish", "tanh", "mish", "gelu_10"}


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
    does not apply (then :func:`hta` uses the generic path): the row must be ``foldable`` (post-LN, no
    causal mask) and the activation element-wise (exact ``gelu`` and the tanh approximations are told
    apart by using the model's own activation module)."""
    a, cfg, m, L = lm.adapter, lm.config, lm.model, lm.n_layers
    if not a.foldable or a.causal or a.pre_ln or getattr(cfg, "is_decoder", False):
        return None
    if getattr(cfg, "add_cross_attention", False) or a.activation(cfg) not in _ELEMENTWISE_ACTS:
        return None
    mods = {f: a.layer_modules(m, getattr(a, f), L)
            for f in ("query", "key", "value", "attn_out", "ln_attn", "ffn_in", "ffn_act", "ffn_out", "ln_ffn")}
    if any(not isinstance(ln, nn.LayerNorm) for ln in mods["ln_attn"] + mods["ln_ffn"]):
        return None
    layers = []
    for i in range(L):
        q, k, v = mods["query"][i], mods["key"][i], mods["value"][i]
        layers.append(_PostLNLayer(
            torch.cat([a.weight(q), a.weight(k), a.weight(v)]), torch.cat([q.bias, k.bias, v.bias]).detach(),
            a.weight(mods["attn_out"][i]), mods["attn_out"][i].bias.detach(), mods["ln_attn"][i],
            a.weight(mods["ffn_in"][i]), mods["ffn_in"][i].bias.detach(), mods["ffn_act"][i],
            a.weight(mods["ffn_out"][i]), mods["ffn_out"][i].bias.detach(), mods["ln_ffn"][i],
            lm.d_v ** -0.5,
        ))
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


def _folded_primal(lm: LoadedModel, layers: list[_PostLNLayer], inp: _Inputs, fold: bool):
    """The post-LN forward pass from x, keeping what the tangent pass needs; returns (states, rel_err)
    where rel_err is the worst relative difference from the model's own hidden states."""
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
        st = _LayerState(q, k, v, a, ctx, xhat1.unsqueeze(1), s1.unsqueeze(1), dact.unsqueeze(1),
                         xhat2.unsqueeze(1), s2.unsqueeze(1))
        if fold:
            st.P = _fold(st.xhat1, st.s1, ly.w1, st.dact, ly.w2, st.xhat2, st.s2)
        states.append(st)
        ref = inp.hidden[li + 1]
        worst = max(worst, float((h - ref).norm() / ref.norm().clamp_min(1e-30)))
    return states, worst


def _should_fold(n_dirs: int, d: int, d_ff: int) -> bool:
    """Fold when precomputing P (n·d²·d_ff MACs) is cheaper than the FFN on every tangent row
    (n_dirs·n·(2·d·d_ff − d²) MACs saved)."""
    return n_dirs * (2 * d * d_ff - d * d) > d * d * d_ff


def _folded_S(lm: LoadedModel, inp: _Inputs, dirs: _Directions, chunk: int | None,
              layers: list[_PostLNLayer], fold: bool | None = None) -> torch.Tensor | None:
    """S by the hand-written batched forward-mode pass; None if its primal pass disagrees with the model."""
    n = inp.x.shape[0]
    d, H = lm.d_model, lm.n_heads
    d_v = d // H
    d_ff = layers[0].w1.shape[0]
    if fold is None:
        fold = _should_fold(dirs.total, d, d_ff)
    with torch.no_grad():
        states, err = _folded_primal(lm, layers, inp, fold)
        if err > PRIMAL_TOL:
            warnings.warn(f"folded HTA: own forward pass differs from {lm.name}'s hidden states by {err:.1e} "
                          f"(> {PRIMAL_TOL}); using the generic forward-mode path instead", stacklevel=3)
            return None
        dev, dt = inp.x.device, inp.x.dtype
        S = torch.zeros(len(layers) + 1, n, n, dtype=torch.float64, device=dev)
        B = _auto_chunk(n, chunk)
        qkv_buf = torch.empty(n * min(B, dirs.count), 3 * d, dtype=dt, device=dev)
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
                # The Q/K/V tangents are the largest tensor of a chunk; one buffer per sentence, reused,
                # spares the allocator a fresh (page-faulting) block per layer on the CPU.
                qkv = qkv_buf[: n * b].view(n, b, 3 * d)
                if li == 0:  # one non-zero row per direction: Q/K/V tangents are one row each
                    qkv.zero_()
                    qkv[pos, cols] = vec @ ly.wqkv.T
                else:
                    torch.mm(t.view(n * b, d), ly.wqkv.T, out=qkv_buf[: n * b])  # (n, B, 3d)
                q5 = qkv.reshape(n, b, 3, H, d_v)
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
                ads = ds.reshape(H, n, b, n).mul_(st.a.unsqueeze(2)).reshape(H, n * b, n)  # A ⊙ dS
                # softmax tangent times V without forming dA: dA V = (A⊙dS) V − rowsum(A⊙dS) ⊙ (A V)
                dctx = (st.a @ dv).reshape(H, n * b, d_v).baddbmm_(ads, st.v)  # A dV + (A⊙dS) V
                dctx = dctx.reshape(H, n, b, d_v)
                dctx -= ads.sum(-1).reshape(H, n, b, 1) * st.ctx.unsqueeze(2)
                del qkv, q5, dq, dk, dv, ds, ads  # free before the next allocations: this bounds the peak
                r = torch.addmm(t.reshape(n * b, d), dctx.permute(1, 2, 0, 3).reshape(n * b, d), ly.wo.T)
                r = r.reshape(n, b, d)  # output projection + residual
                del dctx, t
                if st.P is not None:
                    t = torch.bmm(r, st.P)  # (n, B, d) @ (n, d, d): LN1, FFN, residual, LN2 at once
                else:
                    du = _ln_tangent(r, st.xhat1, st.s1)
                    df = ((du @ ly.w1.T) * st.dact) @ ly.w2.T
                    t = _ln_tangent(df + du, st.xhat2, st.s2)
                    del du, df
                del r
                sq = torch.linalg.vector_norm(t, dim=-1).square_()  # (n_i, B)
                S[li + 1].index_add_(1, pos, sq.double(), alpha=dirs.weight)
            del t, sq  # before the next chunk allocates its own: two alive at once would raise the peak
    return S.cpu()


def folded_flops(lm: LoadedModel, n: int, n_dirs: int, fold: bool = True) -> float:
    """Floating-point operations of the folded tangent pass (the useful work, for GFLOP/s figures).

    Per direction and position: Q/K/V 3d² (skipped in the first layer, where they are one row per
    direction), output projection d², folded P_p d² (or 2·d·d_ff unfolded), attention 4·n·d; times two
    for multiply-add; plus the per-sentence folding, n·d²·d_ff per layer.
    """
    d, d_ff = lm.d_model, lm.d_ff
    L = lm.n_layers
    ffn = d * d if fold else 2 * d * d_ff
    per_row = L * (d * d + ffn + 4 * n * d) + (L - 1) * 3 * d * d
    return 2.0 * n_dirs * n * per_row + (2.0 * L * n * d * d * d_ff if fold else 0.0)


def peak_bytes(lm: LoadedModel, n: int, chunk: int | None = None, method: str = "folded") -> int:
    """The memory bounds of the module docstring, in bytes, for a sentence of n tokens."""
    B = _auto_chunk(n, chunk)
    d, H, L = lm.d_model, lm.n_heads, lm.n_layers
    d_ff = lm.d_ff
    out = 8 * (L + 1) * n * n
    if method == "folded":
        state = 4 * L * n * (d * d + 8 * d + d_ff + 2 * H * n)
        working = 4 * B * n * (12 * d + 3 * H * n)
        folding = 4 * min(n, max(1, 8192 // d)) * d * d_ff
        return state + max(working, folding) + out
    return 4 * B * n * ((L + 1) * d + 3 * d_ff + 4 * H * n) + out


# --------------------------------------------------------------------------------------------------
# the public entry point
# --------------------------------------------------------------------------------------------------


def available_method(lm: LoadedModel) -> str:
    """The engine :func:`hta` picks for ``lm`` with ``method="auto"``: "folded" or "generic"."""
    return "folded" if fold_spec(lm) is not None else "generic"


def hta(
    lm: LoadedModel,
    trace_or_text: str | SentenceTrace,
    mode: str = "exact",
    probes: int = 16,
    chunk: int | None = None,
    method: str = "auto",
    probe: str = "orthonormal",
    seed: int = 0,
    max_tokens: int | None = None,
) -> HTAResult:
    """Hidden Token Attribution of one sentence, all layers at once.

    Args:
        lm: the model.
        trace_or_text: a sentence, or a :class:`SentenceTrace` (its token ids are used).
        mode: "exact" (all d_s·d input directions) or "estimate" (``probes`` random directions per token).
        probes: probes per input token in estimate mode (error falls as 1/√probes).
        chunk: tangent directions per batch (default: about 8,192 / d_s); bounds the working memory.
        method: "auto" (the folded pass where it applies, else generic), "folded", "generic" or "naive".
        probe: "orthonormal" (default, lower variance) or "gaussian".
        seed: seed of the random probes.
        max_tokens: truncation limit for text input.
    Returns:
        An :class:`HTAResult`; ``.c`` is (L+1, d_s, d_s) with rows summing to 1, ``.norms`` the raw norms.
    """
    if mode not in ("exact", "estimate"):
        raise ValueError(f"mode must be 'exact' or 'estimate', got {mode!r}")
    if method not in ("auto", "folded", "generic", "naive"):
        raise ValueError(f"method must be auto, folded, generic or naive, got {method!r}")
    if method == "naive":
        if mode != "exact":
            raise ValueError("the naive reference is exact only")
        return hta_naive(lm, trace_or_text, max_tokens)
    t0 = time.perf_counter()
    inp = _prepare(lm, trace_or_text, max_tokens)
    dirs = _Directions(inp.x.shape[0], inp.x.shape[1], None if mode == "exact" else probes, probe, seed)
    S, used = None, "generic"
    if method in ("auto", "folded"):
        spec = fold_spec(lm)
        if spec is None and method == "folded":
            raise ValueError(f"the folded pass does not apply to {lm.name} ({lm.adapter.family}); use method='auto'")
        if spec is not None:
            S = _folded_S(lm, inp, dirs, chunk, spec)
            used = "folded"
    if S is None:
        S, used = _generic_S(lm, inp, dirs, chunk), "generic"
    return HTAResult(inp.text, inp.tokens, S, used, mode, dirs.probes, time.perf_counter() - t0, inp.special)


CACHE_VERSION = 1  # bump when a change alters the numbers, so stale caches are never read


def hta_corpus(
    lm: LoadedModel,
    texts: Sequence[str | SentenceTrace],
    mode: str = "exact",
    probes: int = 16,
    progress: bool = True,
    desc: str | None = None,
    cache: bool = False,
    seed: int = 0,
    cache_root=None,
    **kwargs,
) -> list[HTAResult]:
    """:func:`hta` for many sentences, with a progress bar; sentence k uses probe seed ``seed + k``.

    With ``cache=True`` the squared norms are stored as safetensors under ``data/cache/hta/<model>/``,
    keyed by the model's weights, the texts and every parameter that changes the numbers.
    """
    items = list(texts)

    def compute() -> list[HTAResult]:
        bar = tqdm(items, desc=desc or f"HTA ({mode})", unit="sentence", disable=not progress or len(items) < 2)
        return [hta(lm, item, mode=mode, probes=probes, seed=seed + k, **kwargs) for k, item in enumerate(bar)]

    if not cache:
        return compute()
    from .results import cached_tensors, params_key  # noqa: I001 (results imports torch only)

    plain = [it.text if isinstance(it, SentenceTrace) else it for it in items]
    params = {"version": CACHE_VERSION, "model": lm.name, "weights": lm.provenance.get("sha256"),
              "texts": params_key({"t": plain}), "n": len(plain), "mode": mode, "seed": seed,
              "probes": probes if mode == "estimate" else None, "probe": kwargs.get("probe", "orthonormal"),
              "max_tokens": kwargs.get("max_tokens"), "method": kwargs.get("method", "auto")}
    fresh: list[HTAResult] = []

    def pack() -> dict[str, torch.Tensor]:
        fresh.extend(compute())
        ids = [lm.tokenizer.convert_tokens_to_ids(r.tokens) for r in fresh]
        return {"S": torch.cat([r.S.flatten() for r in fresh]),
                "lengths": torch.tensor([r.n_tokens for r in fresh]),
                "ids": torch.tensor([i for row in ids for i in row], dtype=torch.long),
                "seconds": torch.tensor([r.seconds for r in fresh], dtype=torch.float64),
                "method": torch.tensor([_METHODS.index(r.method) for r in fresh])}

    t = cached_tensors(f"hta/{lm.key}", params, pack, **({"root": cache_root} if cache_root else {}))
    if fresh:
        return fresh
    out, s_off, i_off, n_layers = [], 0, 0, lm.n_layers + 1
    special_ids = set(lm.tokenizer.all_special_ids)
    for k, n in enumerate(t["lengths"].tolist()):
        ids = t["ids"][i_off:i_off + n].tolist()
        S = t["S"][s_off:s_off + n_layers * n * n].reshape(n_layers, n, n)
        out.append(HTAResult(plain[k], lm.tokenizer.convert_ids_to_tokens(ids), S, _METHODS[int(t["method"][k])],
                             mode, probes if mode == "estimate" else None, float(t["seconds"][k]),
                             [i in special_ids for i in ids]))
        s_off += n_layers * n * n
        i_off += n
    return out


_METHODS = ("naive", "generic", "folded")


# --------------------------------------------------------------------------------------------------
# comparing an estimate with the exact answer
# --------------------------------------------------------------------------------------------------


def estimate_error(exact: Iterable[HTAResult], estimated: Iterable[HTAResult]) -> dict:
    """How far an estimate of c is from exact c, over layers ≥ 1, pooled over sentences.

    Returns:
        median, p95, max: relative error |c_est − c| / c over the entries with c > 0 (causal models:
            later tokens contribute exactly nothing);
        per_layer_median: the median relative error per layer;
        abs_median, abs_p95: absolute error |c_est − c| (c is a share in [0, 1]);
        row_l1_median: median over hidden tokens of Σ_j |c_est − c|, the contribution mass misassigned;
        top_agreement: share of (layer, hidden token) rows whose most-contributing input token is the
            same in both; entries: how many entries were compared.
    """
    errs, absd, l1, layers, same, rows = [], [], [], [], 0, 0
    for ex, es in zip(exact, estimated):
        c0, c1 = ex.c[1:], es.c[1:]
        keep = c0 > 0
        e = (c1 - c0).abs() / c0.where(keep, torch.ones_like(c0))
        errs.append(e[keep])
        absd.append((c1 - c0).abs()[keep])
        l1.append((c1 - c0).abs().sum(-1).flatten())
        layers.append(torch.arange(1, c0.shape[0] + 1).reshape(-1, 1, 1).expand_as(c0)[keep])
        same += int((c0.argmax(-1) == c1.argmax(-1)).sum())
        rows += c0.shape[0] * c0.shape[1]
    e, lay, a, l1 = torch.cat(errs).double(), torch.cat(layers), torch.cat(absd).double(), torch.cat(l1).double()
    q = lambda v, p: float(v.sort().values[int(p * (v.numel() - 1))])  # noqa: E731 (no size limit)
    return {"median": q(e, 0.5), "p95": q(e, 0.95), "max": float(e.max()),
            "per_layer_median": [q(e[lay == layer], 0.5) for layer in sorted(set(lay.tolist()))],
            "abs_median": q(a, 0.5), "abs_p95": q(a, 0.95), "row_l1_median": q(l1, 0.5),
            "top_agreement": same / max(rows, 1), "entries": int(e.numel())}


# --------------------------------------------------------------------------------------------------
# statistics for the chapter (paper figures 3, 4, 18, 25, 26-37)
# --------------------------------------------------------------------------------------------------


def token_table(results: Sequence[HTAResult], tags: Sequence[Sequence[str]] | None = None):
    """One row per (sentence, layer ≥ 1, hidden token) with what the figures aggregate.

    Columns: sentence, layer, position, n_tokens, token, special, tag (POS tag if given, else ""),
    own (c[l, i, i], the input token's share in its own hidden token), top (max_j c[l, i, j]),
    top_position, top_is_self.
    """
    import pandas as pd

    frames = []
    for s, r in enumerate(results):
        c = r.c[1:]  # (L, n, n) float64
        L, n, _ = c.shape
        own = torch.diagonal(c, dim1=-2, dim2=-1)  # (L, n)
        top, arg = c.max(-1)
        tag = list(tags[s]) if tags is not None else [""] * n
        if len(tag) != n:
            raise ValueError(f"sentence {s}: {len(tag)} POS tags for {n} tokens (tokenised differently?)")
        frames.append(pd.DataFrame({
            "sentence": s, "layer": torch.arange(1, L + 1).repeat_interleave(n).numpy(),
            "position": torch.arange(n).repeat(L).numpy(), "n_tokens": n,
            "token": r.tokens * L, "special": (r.special or [False] * n) * L, "tag": tag * L,
            "own": own.flatten().numpy(), "top": top.flatten().numpy(),
            "top_position": arg.flatten().numpy(), "top_is_self": (arg == torch.arange(n)).flatten().numpy(),
        }))
    return pd.concat(frames, ignore_index=True)


def layer_summary(table):
    """Per layer: quantiles of the own-token share, the median share of the top contributor and the
    percentage of hidden tokens whose top contributor is their own input token (paper Fig 3a/3b)."""
    g = table.groupby("layer")
    out = g["own"].quantile([0.05, 0.25, 0.5, 0.75, 0.95]).unstack()
    out.columns = ["own_p05", "own_q1", "own_median", "own_q3", "own_p95"]
    out["top_median"] = g["top"].median()
    out["top_is_self_pct"] = 100 * g["top_is_self"].mean()
    out["tokens"] = g.size()
    return out.reset_index()


def distance_profile(results: Sequence[HTAResult], max_offset: int = 10, skip_special: bool = True):
    """Contribution by relative position k = j − i of the input token (paper Fig 4).

    Per layer and offset: ``mean_c`` = mean of c[l, i, i+k] over hidden tokens i that have a token at
    offset k (the own token at k = 0); ``share`` = Σ_i c[l, i, i+k] / number of hidden tokens, the part
    of all contribution that comes from offset k (summed over every k it is 1; offsets beyond
    ``max_offset`` are pooled into ±(max_offset+1)); ``context_share`` = the same over the non-self
    contribution only. With ``skip_special`` the special tokens are left out as hidden tokens (their
    context is studied separately).
    """
    import pandas as pd

    K = max_offset
    L = results[0].S.shape[0] - 1
    tot = torch.zeros(L, 2 * K + 3, dtype=torch.float64)  # offsets -(K+1)..K+1, the ends pooled
    cnt = torch.zeros(L, 2 * K + 3, dtype=torch.float64)
    rows = 0
    for r in results:
        c = r.c[1:]
        n = c.shape[-1]
        keep = torch.tensor([not s for s in r.special]) if (skip_special and r.special) else torch.ones(n, dtype=torch.bool)
        i = torch.arange(n).reshape(-1, 1).expand(n, n)
        k = (torch.arange(n).reshape(1, -1) - i).clamp(-K - 1, K + 1) + K + 1
        sel = keep.reshape(-1, 1).expand(n, n)
        idx = k[sel]
        for layer in range(L):
            tot[layer].index_add_(0, idx, c[layer][sel])
        cnt.index_add_(1, idx, torch.ones(L, idx.numel(), dtype=torch.float64))
        rows += int(keep.sum())
    offsets = list(range(-K - 1, K + 2))
    share = tot / max(rows, 1)
    context = share.clone()
    context[:, K + 1] = 0
    context = context / context.sum(1, keepdim=True).clamp_min(1e-300)
    # the ends pool every farther offset: their mean_c is not a per-offset mean, so it is left out
    mean_c = (tot / cnt.clamp_min(1)).where(cnt > 0, torch.full_like(tot, float("nan")))
    mean_c[:, 0] = mean_c[:, -1] = float("nan")
    return pd.DataFrame([
        {"layer": layer + 1, "offset": o, "mean_c": float(mean_c[layer, m]), "share": float(share[layer, m]),
         "context_share": float(context[layer, m])}
        for layer in range(L) for m, o in enumerate(offsets)
    ])


def locality(results: Sequence[HTAResult], radius: int = 3, far: int = 8, skip_special: bool = True):
    """Per layer: the part of the context (non-self) contribution that comes from within ``radius``
    tokens, and from farther than ``far`` tokens, next to what uniform mixing over the other tokens of
    the same sentences would give (the baseline that says whether "local" means anything)."""
    import pandas as pd

    L = results[0].S.shape[0] - 1
    near, distant = torch.zeros(L, dtype=torch.float64), torch.zeros(L, dtype=torch.float64)
    base_near = base_far = 0.0
    rows = 0
    for r in results:
        c = r.c[1:]
        n = c.shape[-1]
        keep = torch.tensor([not s for s in r.special]) if (skip_special and r.special) else torch.ones(n, dtype=torch.bool)
        dist = (torch.arange(n).reshape(1, -1) - torch.arange(n).reshape(-1, 1)).abs()
        ctx = c * (dist > 0)
        ctx = ctx / ctx.sum(-1, keepdim=True).clamp_min(1e-300)
        m_near, m_far = ((dist > 0) & (dist <= radius)), dist > far
        near += (ctx * m_near).sum(-1)[:, keep].sum(-1)
        distant += (ctx * m_far).sum(-1)[:, keep].sum(-1)
        # uniform mixing over every other token (causal models: over the earlier ones)
        visible = (c[-1] > 0) & (dist > 0)
        others = visible.sum(-1).clamp_min(1).double()
        base_near += float(((visible & m_near).sum(-1) / others)[keep].sum())
        base_far += float(((visible & m_far).sum(-1) / others)[keep].sum())
        rows += int(keep.sum())
    rows = max(rows, 1)
    return pd.DataFrame({"layer": range(1, L + 1), f"within_{radius}": (near / rows).numpy(),
                         f"beyond_{far}": (distant / rows).numpy(),
                         f"uniform_within_{radius}": base_near / rows, f"uniform_beyond_{far}": base_far / rows})


def special_profile(results: Sequence[HTAResult], max_offset: int = 12):
    """Where the first and the last special token of each sentence ([CLS] and [SEP] in BERT) get their
    context from (paper Figs 18, 25).

    Returns rows (target, layer, offset, mean_c): the mean contribution of the input token ``offset``
    tokens away from the target, counted into the sentence (offset 0 = the target itself), and rows
    (target, layer, source, share) splitting the target's context into itself, the other special
    tokens and the words. Sentences without a special token at that end are skipped; an empty frame
    means the tokenizer adds none (e.g. GPT-2).
    """
    import pandas as pd

    prof, src = [], []
    for r in results:
        n = r.n_tokens
        if not r.special:
            continue
        c = r.c[1:]
        spec = torch.tensor(r.special)
        for target, pos in (("first", 0), ("last", n - 1)):
            if not r.special[pos]:
                continue
            row = c[:, pos]  # (L, n): contributions to the target hidden token
            order = torch.arange(n) if pos == 0 else torch.arange(n - 1, -1, -1)
            for layer in range(row.shape[0]):
                for off in range(min(max_offset + 1, n)):
                    prof.append((target, layer + 1, off, float(row[layer, order[off]])))
                self_share = float(row[layer, pos])
                other_special = float(row[layer][spec].sum()) - self_share
                src.append((target, layer + 1, "itself", self_share))
                src.append((target, layer + 1, "other special tokens", other_special))
                src.append((target, layer + 1, "words", 1.0 - self_share - other_special))
    prof_df = pd.DataFrame(prof, columns=["target", "layer", "offset", "c"])
    src_df = pd.DataFrame(src, columns=["target", "layer", "source", "share"])
    if len(prof_df):
        prof_df = prof_df.groupby(["target", "layer", "offset"], as_index=False)["c"].mean()
        src_df = src_df.groupby(["target", "layer", "source"], as_index=False)["share"].mean()
    return prof_df, src_df


def pos_summary(table, min_count: int = 20):
    """Median own-token share per layer and POS tag (paper Figs 26–37); tags seen fewer than
    ``min_count`` times per layer are dropped."""
    g = table.groupby(["layer", "tag"])["own"]
    out = g.agg(["median", "count"]).reset_index()
    out["q1"] = g.quantile(0.25).values
    out["q3"] = g.quantile(0.75).values
    return out[out["count"] >= min_count].reset_index(drop=True)


def contribution_explorer(results: Sequence[HTAResult], labels: Sequence[str] | None = None, digits: int = 3):
    """An interactive heatmap, drawn in the static page: pick a sentence and a hidden token; rows are
    layers, columns input tokens, colour is c[l, i, j].

    One row per (sentence, layer, hidden token) carries that row of c as an array (flattened in the
    browser), which keeps the page small.
    """
    import json

    import altair as alt
    import pandas as pd

    L = results[0].S.shape[0] - 1
    recs = []
    for s, r in enumerate(results):
        c = r.c[1:].numpy().round(digits)
        for layer in range(L):
            for i in range(r.n_tokens):
                recs.append({"s": s, "l": layer + 1, "i": i, "w": c[layer, i].tolist()})
    df = pd.DataFrame(recs)
    labels = list(labels) if labels is not None else [f"{s}: {r.text[:60]}" for s, r in enumerate(results)]
    token_lists = json.dumps([list(r.tokens) for r in results])
    max_n = max(r.n_tokens for r in results)
    sent = alt.param(name="sentence", value=0,
                     bind=alt.binding_select(options=list(range(len(results))), labels=labels, name="sentence "))
    tok = alt.param(name="token", value=1 if max_n > 1 else 0,
                    bind=alt.binding_range(min=0, max=max_n - 1, step=1, name="hidden token position "))
    base = (
        alt.Chart(df)
        .transform_filter((alt.datum.s == sent) & (alt.datum.i == tok))
        .transform_flatten(["w"])
        .transform_window(j1="row_number()", groupby=["s", "l", "i"])
        .transform_calculate(j="datum.j1 - 1", input=f"{token_lists}[datum.s][datum.j1 - 1]",
                             hidden=f"{token_lists}[datum.s][datum.i]")
    )
    heat = base.mark_rect().encode(
        x=alt.X("j:O", title="input token j",
                axis=alt.Axis(labelExpr=f"{token_lists}[sentence][datum.value]", labelAngle=-60, labelOverlap=False)),
        y=alt.Y("l:O", title="layer"),
        color=alt.Color("w:Q", title="contribution c", scale=alt.Scale(scheme="oranges", domain=[0, 1])),
        tooltip=[alt.Tooltip("hidden:N", title="hidden token"), alt.Tooltip("input:N", title="input token"),
                 alt.Tooltip("l:O", title="layer"), alt.Tooltip("w:Q", title="c", format=".3f")],
    )
    own = base.transform_filter(alt.datum.j == alt.datum.i).mark_rect(fill=None, stroke="black", strokeWidth=1.5).encode(
        x="j:O", y="l:O")
    width = max(300, min(760, 22 * max_n))
    return (heat + own).add_params(sent, tok).properties(
        width=width, height=28 * L,
        title="Contribution of every input token (columns) to the chosen hidden token, per layer (black box: its own input token)")
