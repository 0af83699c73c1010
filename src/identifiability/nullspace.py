"""Non-identifiability of attention: left null spaces, constructed alternatives, the d_s = d_v + 1 threshold
and softmax realisability.

A head's output is ``A @ T`` with A (d_s, d_s) row-stochastic attention and T = V_h W_O^h (d_s, d) (the paper's
T = E W_V H). Any A' with the same rows sums and A'T = AT is an alternative attention with identical output;
the rows of A' - A then lie in the left null space of the augmented matrix [T, 1].

Everything here runs in float64 with ranks taken at an explicit *relative* tolerance ``RTOL``: a singular value
counts when it exceeds ``RTOL`` times the largest one. The chapter shows the gap around that tolerance (the
smallest singular value kept and the largest one dropped), so the choice of ``RTOL`` is visibly irrelevant.

Shapes: S = d_s tokens, d model width, d_v = d / H value width, d_q query/key width, L layers, H heads.
"""

from __future__ import annotations

import math
import random
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

RTOL = 1e-10  # relative rank tolerance (float64)
OUTPUT_TOL = 1e-10  # constructed alternatives must reproduce the head output to this relative error
SEARCH_TOL = 1e-6  # realisable alternatives found by optimisation: accepted up to this relative output error
SHRINK = 1e-12  # the "largest step" is shrunk by this relative amount so rounding cannot produce a negative entry


# --------------------------------------------------------------------------------------------- helpers

def parse_lengths(spec: str | Sequence[int], d_v: int, max_len: int | None = None) -> list[int]:
    """Target sequence lengths from a spec such as ``"8,16,dv,dv+1,dv+2,2dv,256"``.

    Items are integers or expressions in ``dv`` (the head dimension): ``dv``, ``dv+2``, ``dv-8``, ``3dv``.
    Lengths are clipped to ``[2, max_len]``, deduplicated and sorted, so the same spec works for any model.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = set()
    for item in items:
        s = str(item).strip().replace(" ", "").lower()
        if not s:
            continue
        m = re.fullmatch(r"(\d*)dv([+-]\d+)?", s)
        if m:
            n = (int(m.group(1)) if m.group(1) else 1) * d_v + (int(m.group(2)) if m.group(2) else 0)
        elif re.fullmatch(r"\d+", s):
            n = int(s)
        else:
            raise ValueError(f"length {item!r} is neither an integer nor of the form [k]dv[+-n] (e.g. 2dv, dv+2)")
        n = max(2, n)
        if max_len is not None:
            n = min(n, max_len)
        out.add(n)
    return sorted(out)


def text_of_length(corpus, n_tokens: int, tokenizer, seed: int = 0, tries: int = 200) -> str:
    """Consecutive corpus sentences cut to *exactly* ``n_tokens`` tokens (special tokens included).

    :func:`identifiability.corpora.concatenated_inputs` may land a token or two short of its target (a word can
    be several tokens); the threshold example needs the exact length, so start positions are retried.
    """
    from .corpora import concatenated_inputs

    rng = random.Random(seed)
    for _ in range(tries):
        text = concatenated_inputs(corpus, [n_tokens], tokenizer, seed=rng.randrange(1 << 30))[0]
        if len(tokenizer(text)["input_ids"]) == n_tokens:
            return text
    raise ValueError(f"no text of exactly {n_tokens} tokens found in {tries} tries; use another corpus or seed")


@contextmanager
def few_threads(n: int = 1) -> Iterator:
    """Run torch on ``n`` threads inside the block. The Newton and LP loops here work on many small matrices;
    on a 2-core machine shared with other work, a second thread mostly adds synchronisation (measured: the
    max-entropy solve at d_s = 128 took 0.5 s on one thread and 11 s on two under load)."""
    old = torch.get_num_threads()
    torch.set_num_threads(min(n, old))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextmanager
def float64(lm) -> Iterator:
    """Run ``lm`` in float64 inside the block (attention A, values V and logits exact to ~1e-16), then restore.

    Ranks and the realisability test need float64 *inputs*: a float32 A has relative noise ~1e-7, which makes
    every matrix full rank at any tolerance that can also see the real structure.
    """
    dtype = next(lm.model.parameters()).dtype
    lm.model.double()
    try:
        yield lm
    finally:
        lm.model.to(dtype)  # float32 -> float64 -> float32 is exact


def visible_mask(n: int, causal: bool) -> torch.Tensor:
    """(S, S) bool: which keys each query can see (lower triangle for a causal model, all otherwise)."""
    ones = torch.ones(n, n, dtype=torch.bool)
    return torch.tril(ones) if causal else ones


def numerical_rank(s: torch.Tensor, rtol: float = RTOL) -> torch.Tensor:
    """Rank from singular values ``s`` (..., k) sorted descending: count of s > rtol * s_max."""
    return (s > rtol * s[..., :1]).sum(-1)


def tv_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Total-variation distance between corresponding rows, (S,) = 0.5 * ||a_i - b_i||_1."""
    return 0.5 * (a - b).abs().sum(-1)


def rel_output_error(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> float:
    """||(B - A) T||_F / ||A T||_F: how much the head output changes when A is replaced by B."""
    return float(((b - a) @ t).norm() / (a @ t).norm())


# ------------------------------------------------------------------------------- 1. null-space dimensions

@few_threads()
def head_spectra(values: torch.Tensor, w_o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Singular values of T = V W_O and of the augmented [T, c 1], for many heads at once.

    Args:
        values: (..., S, d_v) value vectors V_h (float64).
        w_o: (..., d_v, d) output-projection blocks W_O^h (float64), broadcastable against ``values``.

    Returns:
        (s_T, s_T1, c): s_T (..., min(S, d_v)) singular values of T; s_T1 (..., min(S, d_v + 1)) those of
        [T, c 1] with c = s_max(T) / sqrt(S), so the ones column is as long as T's largest direction (rank is
        scale-free, a relative tolerance is not); c (...,).

    Why not ``svdvals(T)`` directly: T is (S, d) with S up to 512 and d = 384, 72 heads per sentence. With a QR
    [V, 1] = Q R (Q orthonormal) and W_O^T = Q_w R_w, T = Q (R[:, :d_v] R_w^T) Q_w^T, so T and the small
    R[:, :d_v] R_w^T have identical singular values (orthogonal invariance), and likewise [T, c 1] and
    [R[:, :d_v] R_w^T, c R[:, d_v]]. That is exact algebra and costs microseconds; a test checks it against
    a direct SVD of T.
    """
    v = values.double()
    w = w_o.double()
    ones = torch.ones(*v.shape[:-1], 1, dtype=v.dtype)
    _, r = torch.linalg.qr(torch.cat([v, ones], -1))  # r: (..., k, d_v + 1), k = min(S, d_v + 1)
    _, rw = torch.linalg.qr(w.mT)  # (..., d_v, d_v): W_O = rw^T Q_w^T
    core = r[..., :, :-1] @ rw.mT  # (..., k, d_v): same singular values as T
    s_t = torch.linalg.svdvals(core)[..., : min(v.shape[-2], v.shape[-1])]
    c = s_t[..., 0] / math.sqrt(v.shape[-2])
    s_t1 = torch.linalg.svdvals(torch.cat([core, c[..., None, None] * r[..., :, -1:]], -1))
    return s_t, s_t1, c


@few_threads()
def null_space_table(traces, w_o: torch.Tensor, rtol: float = RTOL, progress: bool = True) -> pd.DataFrame:
    """rank(T), dim LN(T), rank([T,1]), dim LN([T,1]) for every text, layer and head.

    Args:
        traces: SentenceTraces from a float64 forward pass (see :func:`float64`).
        w_o: (L, H, d_v, d) output-projection blocks.

    Returns a DataFrame with one row per (text, layer, head): ``text``, ``d_s``, ``layer``, ``head``,
    ``rank_T``, ``dim_LN_T``, ``rank_T1``, ``dim_LN_T1``, the rank-nullity bounds ``bound_T`` = max(0, d_s - d_v)
    and ``bound_T1`` = max(0, d_s - d_v - 1), and the gap around the tolerance: ``kept_min`` (smallest singular
    value counted, relative) and ``dropped_max`` (largest one not counted, relative; NaN if none), for T and [T,1].

    rank(T) comes from a direct SVD of the (d_s, d) matrix T, so its d_s - d_v structural zeros are measured
    (they show up at ~1e-16: the gap). [T, 1] uses the exact reduction of :func:`head_spectra`, which only
    produces the min(d_s, d_v + 1) singular values that can be non-zero.
    """
    rows = []
    d_v = w_o.shape[-2]
    for i, tr in enumerate(tqdm(traces, desc="null spaces", unit="text", disable=not progress)):
        if tr.values.dtype != torch.float64:
            raise ValueError("null_space_table needs float64 traces: trace inside `with float64(lm):`")
        _, s_t1, _ = head_spectra(tr.values, w_o)  # (L, H, k)
        s_t = torch.linalg.svdvals(tr.values.double() @ w_o.double())  # (L, H, min(S, d))
        S = tr.n_tokens
        rel_t, rel_t1 = s_t / s_t[..., :1], s_t1 / s_t1[..., :1]
        r_t, r_t1 = numerical_rank(s_t, rtol), numerical_rank(s_t1, rtol)
        L, H = r_t.shape
        for layer in range(L):
            for head in range(H):
                a, b = int(r_t[layer, head]), int(r_t1[layer, head])
                rt, rt1 = rel_t[layer, head], rel_t1[layer, head]
                rows.append(dict(
                    text=i, d_s=S, layer=layer, head=head, rank_T=a, dim_LN_T=S - a, rank_T1=b, dim_LN_T1=S - b,
                    bound_T=max(0, S - d_v), bound_T1=max(0, S - d_v - 1),
                    kept_min_T=float(rt[a - 1]), dropped_max_T=float(rt[a]) if a < len(rt) else float("nan"),
                    kept_min_T1=float(rt1[b - 1]), dropped_max_T1=float(rt1[b]) if b < len(rt1) else float("nan"),
                ))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------- bases

def output_basis(t: torch.Tensor, rtol: float = RTOL, augmented: bool = False) -> torch.Tensor:
    """Orthonormal basis (S, r) of col(T), or of col([T, 1]) if ``augmented``; from a float64 SVD."""
    t = t.double()
    if augmented:
        s0 = torch.linalg.svdvals(t)[0] if t.numel() else torch.tensor(1.0, dtype=t.dtype)
        t = torch.cat([t, torch.full((t.shape[0], 1), float(s0) / math.sqrt(t.shape[0]), dtype=t.dtype)], 1)
    u, s, _ = torch.linalg.svd(t, full_matrices=False)
    return u[:, : int(numerical_rank(s, rtol))]


def left_null_basis(t: torch.Tensor, rtol: float = RTOL, augmented: bool = True) -> torch.Tensor:
    """Orthonormal basis (S, k) of the left null space LN([T, 1]) (or LN(T)); k = S - rank."""
    t = t.double()
    if augmented:
        s0 = torch.linalg.svdvals(t)[0]
        t = torch.cat([t, torch.full((t.shape[0], 1), float(s0) / math.sqrt(t.shape[0]), dtype=t.dtype)], 1)
    u, s, _ = torch.linalg.svd(t, full_matrices=True)
    return u[:, int(numerical_rank(s, rtol)):]


def _row_null_bases(t: torch.Tensor, visible: torch.Tensor | None, rtol: float) -> list[torch.Tensor]:
    """Per query row, an orthonormal basis (S, k_i) of the row's admissible perturbations: vectors supported on
    the keys it can see, orthogonal to 1 and to the visible rows of T. One shared basis without a mask."""
    S = t.shape[0]
    if visible is None or bool(visible.all()):
        return [left_null_basis(t, rtol)] * S
    bases = []
    for i in range(S):
        idx = visible[i].nonzero().squeeze(1)
        nb = left_null_basis(t[idx], rtol)
        full = torch.zeros(S, nb.shape[1], dtype=nb.dtype)
        full[idx] = nb
        bases.append(full)
    return bases


# --------------------------------------------------------------------------- 2. constructed alternatives

def _largest_step(a: torch.Tensor, d: torch.Tensor, cap: float = math.inf) -> torch.Tensor:
    """Per row, the largest t <= cap with a + t d >= 0, shrunk by ``SHRINK`` (rows (S,), a and d (S, S))."""
    neg = d < 0
    ratio = torch.where(neg, a / (-d).where(neg, torch.ones_like(d)), torch.full_like(a, math.inf))
    t = ratio.min(1).values.clamp(max=cap)
    return t * (1 - SHRINK)


@few_threads()
def construct_alternative(a: torch.Tensor, t: torch.Tensor, visible: torch.Tensor | None = None,
                          seed: int = 0, rtol: float = RTOL) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's construction: for each row a random direction in LN([T, 1]), scaled to the largest step that
    keeps A + Ã >= 0.

    Args:
        a: (S, S) attention (float64, strictly positive on visible keys).
        t: (S, d) the head's T.
        visible: (S, S) bool mask of the keys each row may use (causal models); None = all.

    Returns:
        (A + Ã, step) with step (S,) the scale per row (0 for rows whose null space is empty, e.g. every row
        when d_s <= rank(T) + 1).
    """
    a = a.double()
    S = a.shape[0]
    g = torch.Generator().manual_seed(seed)
    bases = _row_null_bases(t, visible, rtol)
    d = torch.zeros(S, S, dtype=a.dtype)
    for i, nb in enumerate(bases):
        if nb.shape[1]:
            c = torch.randn(nb.shape[1], generator=g, dtype=a.dtype)
            d[i] = nb @ (c / c.norm())
    step = _largest_step(a, d)
    step = torch.where(torch.isfinite(step), step, torch.zeros_like(step))
    return a + step[:, None] * d, step


def verify_alternative(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> dict:
    """Check that B is a valid alternative to A: row sums, non-negativity, unchanged output; and how different."""
    tv = tv_rows(a, b)
    return dict(
        row_sum_max_error=float((b.sum(1) - 1).abs().max()),
        min_entry=float(b.min()),
        rel_output_error=rel_output_error(a, b, t),
        tv_mean=float(tv.mean()),
        tv_max=float(tv.max()),
    )


def _row_aug_bases(t: torch.Tensor, visible: torch.Tensor | None, rtol: float) -> list[torch.Tensor] | torch.Tensor:
    if visible is None or bool(visible.all()):
        return output_basis(t, rtol, augmented=True)
    out = []
    for i in range(t.shape[0]):
        idx = visible[i].nonzero().squeeze(1)
        ub = output_basis(t[idx], rtol, augmented=True)
        full = torch.zeros(t.shape[0], ub.shape[1], dtype=ub.dtype)
        full[idx] = ub
        out.append(full)
    return out


@few_threads()
def max_tv_alternative(a: torch.Tensor, t: torch.Tensor, visible: torch.Tensor | None = None,
                       rtol: float = RTOL, rounds: int = 2, starts: Sequence[torch.Tensor] = (),
                       top_start: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """How different can an output-preserving, row-stochastic alternative be? Per row, a large total-variation
    distance found by linear programming (a lower bound on the maximum: TV is convex, so maximising it is not an
    LP; we alternate between fixing the set of keys that gain mass and solving the LP for that set).

    Round 1 moves as much mass as possible away from each row's strongest key; later rounds take the keys
    that gained mass as the new set. ``starts`` adds further initial sets, (S, S) bool each (e.g. the keys
    a known alternative B gains on, B > A: then the result is at least as far from A as B, row by row). The LP's solution satisfies the constraints only to the solver's tolerance
    (~1e-9), so its direction is projected exactly onto LN([T, 1]) and re-scaled to stay >= 0.

    Returns (A', tv) with A' (S, S) and tv (S,) per row.
    """
    from scipy import sparse
    from scipy.optimize import linprog

    a = a.double()
    S = a.shape[0]
    vis = visible if visible is not None else torch.ones(S, S, dtype=torch.bool)
    ub = _row_aug_bases(t, visible, rtol)
    shared = isinstance(ub, torch.Tensor)
    if shared and ub.shape[1] >= S:  # d_s <= rank([T,1]): A is the only solution
        return a.clone(), torch.zeros(S, dtype=a.dtype)
    blocks = [ub.T.numpy()] * S if shared else [u.T.numpy() for u in ub]
    a_eq = sparse.block_diag(blocks, format="csr")
    b_eq = np.concatenate([blk @ a[i].numpy() for i, blk in enumerate(blocks)])
    bounds = np.stack([np.zeros(S * S), np.where(vis.flatten().numpy(), np.inf, 0.0)], 1)
    top = vis.clone()
    top[torch.arange(S), a.masked_fill(~vis, -1).argmax(1)] = False  # everything but the top key
    best, best_tv = a.clone(), torch.zeros(S, dtype=a.dtype)
    for gain in ([top] if top_start else []) + [st & vis for st in starts]:
        for _ in range(rounds):
            res = linprog(-gain.flatten().double().numpy(), A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
            if res.status != 0:
                break
            q = torch.from_numpy(res.x).view(S, S)
            d = (q - a).masked_fill(~vis, 0)
            if shared:
                d = d - (d @ ub) @ ub.T  # exact projection onto LN([T, 1])
            else:
                d = torch.stack([d[i] - (d[i] @ ub[i]) @ ub[i].T for i in range(S)])
            step = _largest_step(a, d, cap=1.0)
            step = torch.where(torch.isfinite(step), step, torch.zeros_like(step))
            cand = a + step[:, None] * d
            tv = tv_rows(a, cand)
            better = tv > best_tv
            best[better], best_tv[better] = cand[better], tv[better]
            gain = (q > a + 1e-12) & vis
    return best, best_tv


@few_threads()
def head_survey(a_all: torch.Tensor, values: torch.Tensor, w_o: torch.Tensor, d_q: int, causal: bool = False,
                rounds: int = 1, progress: bool = True) -> pd.DataFrame:
    """For every head of one sentence: how far an output-preserving alternative can move (LP, the paper's
    row-stochastic alternatives) and how far a *realisable* one does (the max-entropy alternative).

    Args:
        a_all: (L, H, S, S) attention, values: (L, H, S, d_v), w_o: (L, H, d_v, d), all float64.

    Returns one row per (layer, head): ``lp_tv_mean``/``lp_tv_max`` (over query rows) and ``lp_error``
    (relative output error), ``me_tv_mean``/``me_tv_max``/``me_error``, and ``me_rank`` (rank of the centred log
    of the max-entropy alternative; None for causal models). The LP is also started from the keys the
    max-entropy alternative gains on (only from there, to halve the cost), so ``lp_tv`` >= ``me_tv`` row by row
    up to the LP solver's feasibility tolerance (~1e-7).
    """
    L, H, S, _ = a_all.shape
    vis = visible_mask(S, True) if causal else None
    rows = []
    for layer, head in tqdm([(l, h) for l in range(L) for h in range(H)], desc="alternatives per head",
                            unit="head", disable=not progress):
        a = a_all[layer, head].double()
        t = values[layer, head].double() @ w_o[layer, head].double()
        me = max_entropy_alternative(a, t, d_q, causal)
        lp, tv = max_tv_alternative(a, t, vis, rounds=rounds, starts=[me["a_alt"] > a], top_start=False)
        me_tv = tv_rows(a, me["a_alt"])
        real = realisability(d_q=d_q, log_probs=me["log_a_alt"], causal=causal)
        rows.append(dict(layer=layer, head=head, d_s=S, lp_tv_mean=float(tv.mean()), lp_tv_max=float(tv.max()),
                         lp_error=rel_output_error(a, lp, t), me_tv_mean=float(me_tv.mean()),
                         me_tv_max=float(me_tv.max()), me_error=rel_output_error(a, me["a_alt"], t),
                         me_rank=real.rank))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ 3. threshold

def exact_threshold_examples() -> dict:
    """Exact (rational) arithmetic for d_s = 3, d_v = 2, with sympy.

    ``generic``: T of rank 2; all row-stochastic A' with A'T = AT are solved for symbolically; the solution is
    unique (A' = A) because LN(T) is spanned by one x with x·1 != 0.
    ``deficient``: T of rank 1 < d_v; then LN([T,1]) has dimension d_s - rank([T,1]) = 1 and a one-parameter
    family per row remains.
    """
    import sympy as sp

    A = sp.Matrix([[sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 6)],
                   [sp.Rational(1, 5), sp.Rational(3, 5), sp.Rational(1, 5)],
                   [sp.Rational(1, 4), sp.Rational(1, 4), sp.Rational(1, 2)]])
    out = {"A": A}
    for name, T in {"generic": sp.Matrix([[1, 2], [3, -1], [2, 5]]),
                    "deficient": sp.Matrix([[1, 2], [2, 4], [-1, -2]])}.items():
        syms = sp.symbols("x0:9")
        X = sp.Matrix(3, 3, syms)
        eqs = list(X * T - A * T) + list(X * sp.ones(3, 1) - sp.ones(3, 1))
        sol = sp.linsolve(eqs, syms)
        (tup,) = list(sol)
        Xsol = sp.Matrix(3, 3, list(tup))
        ln = T.T.nullspace()  # LN(T) = null(T^T)
        ln1 = T.row_join(sp.ones(3, 1)).T.nullspace()
        free = sorted(Xsol.free_symbols, key=str)
        out[name] = {
            "T": T, "rank_T": T.rank(), "LN_T": [list(v) for v in ln],
            "x_dot_1": [sp.nsimplify(sum(v)) for v in ln], "dim_LN_T1": len(ln1),
            "solution": Xsol, "free_parameters": len(free), "unique": len(free) == 0 and Xsol == A,
        }
    return out


@few_threads()
def threshold_margins(values: torch.Tensor, w_o: torch.Tensor, rtol: float = RTOL) -> pd.DataFrame:
    """For a sentence of d_s = d_v + 1 tokens, per head: rank([T, 1]) (= d_s means the linear system
    A'[T, 1] = A[T, 1] has only the solution A' = A), its smallest relative singular value (how far from
    degenerate), and |x·1| / (||x|| sqrt(d_s)) for x spanning LN(T) (0 would mean the ones vector is orthogonal
    to LN(T), the non-generic case in which a perturbation survives).

    Args: values (L, H, S, d_v) and w_o (L, H, d_v, d), float64.
    """
    L, H, S, _ = values.shape
    _, s_t1, _ = head_spectra(values, w_o)
    rows = []
    for layer in range(L):
        for head in range(H):
            t = values[layer, head].double() @ w_o[layer, head].double()
            ln = left_null_basis(t, rtol, augmented=False)
            cos = float((ln.sum(0).norm() / math.sqrt(S))) if ln.shape[1] else float("nan")
            s1 = s_t1[layer, head]
            rows.append(dict(layer=layer, head=head, d_s=S, dim_LN_T=ln.shape[1],
                             rank_T1=int(numerical_rank(s1, rtol)), sigma_min_T1=float(s1[-1] / s1[0]),
                             ones_in_LN_T=cos))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------- 4. realisability

@dataclass
class Realisability:
    """Result of the exact softmax-realisability test for one attention matrix.

    realisable: True/False, or None when the test does not apply (causal masks: see ``reason``).
    rank: numerical rank of log(A') with row means removed (None if not computed).
    spectrum: its singular values relative to the largest (float64 tensor), for plotting.
    """

    realisable: bool | None
    rank: int | None
    reason: str
    spectrum: torch.Tensor | None = field(default=None, repr=False)


def centered_log(a: torch.Tensor | None = None, log_probs: torch.Tensor | None = None) -> torch.Tensor:
    """log(A') with each row's mean removed, (S, S). Pass ``log_probs`` (e.g. log_softmax of known logits) to
    avoid taking log of probabilities that underflowed."""
    lp = log_probs if log_probs is not None else a.double().log()
    return lp - lp.mean(1, keepdim=True)


def realisability(a: torch.Tensor | None = None, d_q: int = 64, log_probs: torch.Tensor | None = None,
                  causal: bool = False, rtol: float = RTOL) -> Realisability:
    """Is A' = softmax(Q'K'^T / sqrt(d_q)) for some Q', K' in R^{S x d_q}?

    Exact criterion (no mask): A' must be strictly positive and M = log(A') - rowmean has rank <= d_q.
    Proof: softmax(L') = A' iff L' = log A' + c 1^T for some c; then M = L'(I - 11^T/S), so rank M <= rank L'
    <= d_q; conversely M itself has M 1 = 0 and softmax(M) = A', and any rank-<= d_q matrix is Q'K'^T/sqrt(d_q).

    With a causal mask only the lower triangle of L' is constrained: the question becomes a low-rank *completion*
    problem with no exact rank test, so the answer is None (the chapter says so and checks explicit Q', K'
    instead).
    """
    if causal:
        return Realisability(None, None, "causal mask: the entries above the diagonal are free, so realisability "
                             "is a low-rank completion problem; the exact rank test does not apply")
    if log_probs is None:
        a = a.double()
        if bool((a <= 0).any()):
            return Realisability(False, None, f"{int((a <= 0).sum())} entries are 0, but softmax is strictly positive")
    m = centered_log(a, log_probs)
    if not bool(torch.isfinite(m).all()):
        return Realisability(False, None, "log-probabilities not finite: an entry is 0")
    s = torch.linalg.svdvals(m)
    r = int(numerical_rank(s, rtol))
    ok = r <= d_q
    return Realisability(ok, r, f"rank(log A' - row means) = {r} {'<=' if ok else '>'} d_q = {d_q}", s / s[0])


def attention_from_factors(q: torch.Tensor, k: torch.Tensor, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(A', log A') = softmax(Q K^T / sqrt(d_q)) with an optional causal mask; q, k (S, d_q)."""
    logits = q @ k.T / math.sqrt(k.shape[1])
    if causal:
        logits = logits.masked_fill(~visible_mask(q.shape[0], True), -math.inf)
    lp = torch.log_softmax(logits, -1)
    return lp.exp(), lp


def factor_attention(a: torch.Tensor, d_q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Q, K (S, d_q) with softmax(Q K^T / sqrt(d_q)) = A, from an SVD of the centred log (bidirectional heads).

    The real head's own Q, K would do as well; factoring A itself needs nothing but A, so it works for any
    model whose A is strictly positive. Raises if A is not realisable with d_q (which would contradict A
    being a softmax attention of this width).
    """
    m = centered_log(a)
    u, s, vh = torch.linalg.svd(m)
    r = int(numerical_rank(s, RTOL))
    if r > d_q:
        raise ValueError(f"log A - rowmean has rank {r} > d_q = {d_q}: A is not a d_q-wide softmax attention")
    k = min(d_q, s.shape[0])
    scale = d_q ** 0.25
    q = torch.zeros(a.shape[0], d_q, dtype=m.dtype)
    kk = torch.zeros(a.shape[0], d_q, dtype=m.dtype)
    q[:, :k] = u[:, :k] * s[:k].sqrt() * scale
    kk[:, :k] = vh[:k].T * s[:k].sqrt() * scale
    return q, kk


def _solve_rows(j: torch.Tensor, g: torch.Tensor, damping: float = 1e-13) -> torch.Tensor:
    """Minimum-norm Levenberg-Marquardt step per row: j (S, r, p), g (S, r) -> (S, p) = J^T (J J^T + λ I)^-1 g."""
    jjt = j @ j.mT
    lam = damping * jjt.diagonal(dim1=-2, dim2=-1).sum(-1).clamp_min(1e-300)
    eye = torch.eye(jjt.shape[-1], dtype=j.dtype)
    y = torch.linalg.solve(jjt + lam[:, None, None] * eye, g.unsqueeze(-1))
    return (j.mT @ y).squeeze(-1)


def _moment_jacobian(p: torch.Tensor, u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """d(p_i U)/d q_i for p_i = softmax(q_i K^T / sqrt(d_q)): U^T (diag p_i - p_i p_i^T) K / sqrt(d_q), (S, r, d_q)."""
    pu = p @ u
    pk = p @ k
    j = (u.T.unsqueeze(0) * p.unsqueeze(1)) @ k  # (S, r, d_q) = U^T diag(p_i) K
    return (j - pu.unsqueeze(2) * pk.unsqueeze(1)) / math.sqrt(k.shape[1])


def solve_queries(q0: torch.Tensor, k: torch.Tensor, u: torch.Tensor, target: torch.Tensor, causal: bool = False,
                  iters: int = 30, tol: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """Given keys K, find queries Q (row by row, damped Newton from q0) with softmax(QK^T/sqrt(d_q)) U = target.

    Args: q0, k (S, d_q); u (S, r) orthonormal basis of col(T); target (S, r) = A U.
    Returns (Q, residual per row relative to ||target row||).
    """
    q = q0.clone()
    scale = target.norm(dim=1).clamp_min(1e-300)

    def resid(qq):
        p, _ = attention_from_factors(qq, k, causal)
        return p, p @ u - target

    p, g = resid(q)
    res = g.norm(dim=1) / scale
    for _ in range(iters):
        if bool((res < tol).all()):
            break
        step = _solve_rows(_moment_jacobian(p, u, k), g)
        t = torch.ones(q.shape[0], 1, dtype=q.dtype)
        for _ in range(40):  # backtrack per row on the residual norm
            p1, g1 = resid(q - t * step)
            r1 = g1.norm(dim=1) / scale
            ok = (r1 < res) | (res < tol)
            if bool(ok.all()):
                break
            t[~ok] *= 0.5
        q = torch.where((r1 < res)[:, None], q - t * step, q)
        p, g = resid(q)
        res = g.norm(dim=1) / scale
    return q, res


@few_threads()
def max_entropy_alternative(a: torch.Tensor, t: torch.Tensor, d_q: int, causal: bool = False, rtol: float = RTOL,
                            iters: int = 400, tol: float = 1e-12) -> dict:
    """A realisable alternative in closed form: per row, the maximum-entropy distribution with the same output.

    Take K' = U sqrt(d_q) (U an orthonormal basis of col(T), padded with zero columns to width d_q) and choose
    each query q'_i so that softmax(q'_i K'^T / sqrt(d_q)) U = a_i U. The row of A' = softmax(Q'K'^T/sqrt(d_q))
    is then the exponential-family (maximum-entropy) member with the same moments a_i U, which exists and is
    unique whenever a_i is strictly positive (it is the I-projection of the uniform distribution onto the
    affine set of row-stochastic rows with the same output). Finding q'_i is a convex problem (minimise
    logsumexp(U q) - q·a_iU), solved by Newton. A' reproduces A's output exactly and is realisable with
    d_q >= rank(T) by construction. It equals A exactly when that set is the single point A (d_s <= rank(T) + 1)
    and generically differs from A otherwise.

    Returns dict(q, k, a_alt, log_a_alt, residual (max relative moment error), iterations).
    """
    a = a.double()
    S = a.shape[0]
    u = output_basis(t, rtol)
    r = u.shape[1]
    if r > d_q:
        raise ValueError(f"rank(T) = {r} > d_q = {d_q}: this construction needs d_q >= rank(T)")
    target = a @ u
    scale = target.norm(dim=1).clamp_min(1e-300)
    mask = visible_mask(S, causal)
    w = torch.zeros(S, r, dtype=a.dtype)  # dual variables: logits = w U^T

    def pg(w):
        p = torch.softmax((w @ u.T).masked_fill(~mask, -math.inf), -1)
        return p, p @ u - target

    def decrease(p, step):
        """f(w - step) - f(w) for f(w) = logsumexp(w U^T) - w·m, computed without cancellation: f itself is a
        difference of numbers ~|w| that agree to many digits near the optimum, its change is not."""
        e = (p * torch.expm1(-(step @ u.T))).sum(1)
        return torch.log1p(e) + (step * target).sum(1)

    p, g = pg(w)
    it = 0
    # Levenberg-Marquardt-damped Newton per row: one evaluation per iteration, damping mu shrinks after a step
    # that lowers f and grows after one that does not, so far-away rows take gradient-like steps and near rows
    # Newton steps. f is convex, so lowering it is the right acceptance test.
    mu = torch.full((S,), 1e-4, dtype=a.dtype)
    stalled = torch.zeros(S, dtype=torch.bool)
    eye = torch.eye(r, dtype=a.dtype)
    for it in range(iters):
        res = g.norm(dim=1) / scale
        active = (res > tol) & ~stalled
        if not bool(active.any()):
            break
        pu = p @ u
        h = (u.T.unsqueeze(0) * p.unsqueeze(1)) @ u - pu.unsqueeze(2) * pu.unsqueeze(1)  # Hessian (S, r, r)
        lam = mu * h.diagonal(dim1=-2, dim2=-1).sum(-1) / r + 1e-200  # rows seeing one key have h = 0
        step = torch.linalg.solve(h + lam[:, None, None] * eye, g.unsqueeze(-1)).squeeze(-1)
        step = step.masked_fill(~active[:, None], 0)
        # trust region: no logit moves by more than 8 nats per step. A full Newton step from a flat start can
        # jump to a softmax saturated in float64 (one weight rounds to 1), where f is flat to rounding and the
        # iteration would stall far from the optimum.
        reach = (step @ u.T).abs().masked_fill(~mask, 0).amax(1)
        step = step * (8.0 / reach.clamp_min(8.0))[:, None]
        df = decrease(p, step)
        good = active & torch.isfinite(df) & (df < 0)
        p1, g1 = pg(w - step)
        w = torch.where(good[:, None], w - step, w)
        p = torch.where(good[:, None], p1, p)
        g = torch.where(good[:, None], g1, g)
        mu = torch.where(good, (mu / 10).clamp_min(1e-15), mu * 10)
        stalled |= mu > 1e200  # not even a tiny gradient step lowers f: the limit of float64 for this row
    q = torch.zeros(S, d_q, dtype=a.dtype)
    k = torch.zeros(S, d_q, dtype=a.dtype)
    q[:, :r] = w
    k[:, :r] = u * math.sqrt(d_q)  # logits = Q K^T / sqrt(d_q) = w U^T
    alt, log_alt = attention_from_factors(q, k, causal)
    return dict(q=q, k=k, a_alt=alt, log_a_alt=log_alt, residual=float((g.norm(dim=1) / scale).max()),
                iterations=it + 1)


@dataclass
class SearchResult:
    """The best realisable alternative found by :func:`search_realisable` (verified by recomputation)."""

    q: torch.Tensor  # (S, d_q)
    k: torch.Tensor  # (S, d_q)
    a_alt: torch.Tensor  # (S, S) = softmax(q k^T / sqrt(d_q)), recomputed
    tv_mean: float
    tv_max: float
    rel_output_error: float
    start_tv_mean: float
    history: list[dict]
    rejected_steps: int


@few_threads()
def search_realisable(a: torch.Tensor, t: torch.Tensor, d_q: int, causal: bool = False, steps: int = 60,
                      lr: float = 0.05, start: str = "maxent", q0: torch.Tensor | None = None,
                      k0: torch.Tensor | None = None, seed: int = 0, tol: float = SEARCH_TOL,
                      logit_cap: float = 300.0, progress: bool = False) -> SearchResult:
    """Search for a softmax-realisable A' = softmax(Q'K'^T/sqrt(d_q)) with A'T = AT, as far from A as possible.

    The constraint A'T = AT is d_s·rank(T) equations; keeping it while moving freely is what makes a plain
    penalty method stiff (it stalls at output errors ~1e-4). Instead the keys K' are the free variables, moved
    by Adam (torch autograd, float64) to maximise the mean total-variation distance to A, and for every K' the
    queries Q' are solved row by row by Newton so that the output constraint holds to ~1e-12. The gradient
    through that solve comes from one differentiable Newton step at the solution (the implicit-function
    theorem). A step whose Newton solve does not converge is undone and the learning rate halved.
    ``logit_cap`` penalises rows whose smallest probability falls below exp(-logit_cap) (so probabilities do
    not underflow to an exact 0 in float64).

    Args:
        a: (S, S) attention, float64, strictly positive on visible keys. t: (S, d) the head's T.
        start: "maxent" (start from :func:`max_entropy_alternative`) or "given" (q0, k0: e.g. the head's own).

    Every accepted iterate is recomputed from (Q', K') and kept as the best if its relative output error is
    <= ``tol``.
    """
    a = a.double()
    u = output_basis(t, RTOL)
    target = a @ u
    if start == "maxent":
        me = max_entropy_alternative(a, t, d_q, causal)
        q, k = me["q"], me["k"]
    else:
        q, k = q0.double().clone(), k0.double().clone()
    g = torch.Generator().manual_seed(seed)
    k = k + 1e-6 * k.abs().mean() * torch.randn(k.shape, generator=g, dtype=k.dtype)  # leave a flat start point
    q, res = solve_queries(q, k, u, target, causal)
    if float(res.max()) > 1e-9:
        raise RuntimeError(f"could not re-solve the queries at the start (residual {float(res.max()):.1e})")
    kp = k.clone().requires_grad_(True)
    opt = torch.optim.Adam([kp], lr=lr)

    def verify(qq, kk):
        alt, _ = attention_from_factors(qq, kk, causal)
        tv = tv_rows(a, alt)
        return alt, float(tv.mean()), float(tv.max()), rel_output_error(a, alt, t)

    alt, tvm, tvx, err = verify(q, k)
    best = (tvm, tvx, err, q.clone(), k.clone(), alt)
    start_tv = tvm
    history = [dict(step=0, tv_mean=tvm, rel_output_error=err)]
    rejected = 0
    k_prev = k.clone()
    for step in tqdm(range(1, steps + 1), desc="realisable search", disable=not progress):
        with torch.no_grad():
            q_new, res = solve_queries(q, kp.detach(), u, target, causal, iters=12)
        if float(res.max()) > 1e-10:  # this K' has no exact solution nearby: undo, smaller steps
            rejected += 1
            with torch.no_grad():
                kp.copy_(k_prev)
            for gr in opt.param_groups:
                gr["lr"] *= 0.5
            continue
        q = q_new
        alt, tvm, tvx, err = verify(q, kp.detach())
        if err <= tol and tvm > best[0]:
            best = (tvm, tvx, err, q.clone(), kp.detach().clone(), alt)
        history.append(dict(step=step, tv_mean=tvm, rel_output_error=err))
        # differentiable Newton step at the solution: dQ/dK' by the implicit-function theorem
        kd = kp.detach()
        p, _ = attention_from_factors(q, kd, causal)
        jac = _moment_jacobian(p, u, kd)
        p_k, _ = attention_from_factors(q, kp, causal)
        q_k = q - _solve_rows(jac, p_k @ u - target)
        p2, lp2 = attention_from_factors(q_k, kp, causal)
        spread = (lp2.masked_fill(~visible_mask(a.shape[0], causal), math.inf).min(1).values).neg()
        loss = -tv_rows(a, p2).mean() + 1e-3 * torch.relu(spread - logit_cap).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        k_prev = kd.clone()
        opt.step()
    tvm, tvx, err, q, k, alt = best
    alt, tvm, tvx, err = verify(q, k)  # recompute from the factors: what is reported is what they give
    return SearchResult(q=q, k=k, a_alt=alt, tv_mean=tvm, tv_max=tvx, rel_output_error=err, start_tv_mean=start_tv,
                        history=history, rejected_steps=rejected)


def expected_dimension(d_s: int, d_q: int, rank_t1: int) -> int:
    """Expected dimension of the set of realisable A' with A'T = AT (parameter count; transversality assumed).

    Realisable matrices: softmax of rank-<= d_q logits. The logits have d_q(2 d_s - d_q) parameters, but
    Q K^T and Q (K + 1 w^T)^T = QK^T + (Q w) 1^T give the same softmax (a d_q-dimensional fibre), so the image
    has dimension d_q(2 d_s - d_q - 1) (all d_s(d_s - 1) dimensions of strictly positive row-stochastic
    matrices once d_q >= d_s - 1). The output constraint removes d_s (rank([T,1]) - 1) dimensions.
    With rank([T,1]) = d_v + 1 and d_q = d_v this is d_q (d_s - d_q - 1): zero at d_s = d_q + 1 (A is
    isolated), positive from d_s = d_q + 2 on.
    """
    realisable = min(d_q * (2 * d_s - d_q - 1), d_s * (d_s - 1))
    return max(0, realisable - d_s * (rank_t1 - 1))


@few_threads()
def local_solution_dimension(a: torch.Tensor, t: torch.Tensor, d_q: int, rtol: float = RTOL) -> dict:
    """Measure the dimension of realisable, output-preserving alternatives near A from a Jacobian.

    With (Q, K) factoring A and f(Q, K) = softmax(QK^T/sqrt(d_q)) U (U a basis of col(T)), the solution set
    {f = f(Q, K)} is a manifold of dimension nullity(J) near (Q, K) when J = df has full row rank; the
    reparametrisations (Q G, K G^-T) and (Q, K + 1 w^T) account for d_q^2 + d_q of it. The rest is the
    dimension of the set of realisable A' with the same output. Bidirectional heads only (needs log A).

    Returns dict(rows, rank, full_row_rank, dimension, gap: smallest kept relative singular value).
    """
    a = a.double()
    S = a.shape[0]
    if S < d_q + 1:
        raise ValueError(f"d_s = {S} < d_q + 1: every positive row-stochastic matrix is realisable there and the "
                         "reparametrisation count d_q^2 + d_q does not apply")
    q, k = factor_attention(a, d_q)
    # Rows of A' - A sum to 0, so (A' - A) T = 0 iff (A' - A) P T = 0 with P the projection onto 1-perp: a basis of
    # col(P T) (dimension rank([T,1]) - 1) gives the output constraints without the redundant row-sum direction.
    t = t.double()
    u = output_basis(t - t.mean(0, keepdim=True), rtol)

    def f(theta):
        qq, kk = theta[: S * d_q].view(S, d_q), theta[S * d_q:].view(S, d_q)
        return (torch.softmax(qq @ kk.T / math.sqrt(d_q), -1) @ u).flatten()

    jac = torch.func.jacrev(f)(torch.cat([q.flatten(), k.flatten()]))
    s = torch.linalg.svdvals(jac)
    rank = int(numerical_rank(s, rtol))
    return dict(rows=jac.shape[0], rank=rank, full_row_rank=rank == jac.shape[0],
                dimension=jac.shape[1] - rank - d_q * d_q - d_q, gap=float(s[rank - 1] / s[0]))


@few_threads()
def search_by_length(traces, w_o: torch.Tensor, heads: Sequence[tuple[int, int]], d_q: int, causal: bool = False,
                     steps: int = 30, lp_rounds: int = 1, jacobian_max_length: int = 0,
                     progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Realisable alternatives for the given heads on texts of increasing length.

    For each trace (one d_s each) and (layer, head): the max-entropy alternative, the optimiser's
    (:func:`search_realisable`, ``steps`` Adam steps from the max-entropy point), the LP's row-stochastic
    alternative (the linear set the paper works with; started from the keys the search's alternative gains on,
    so it is at least as far), the dimension counts, and, for d_s <= ``jacobian_max_length`` (bidirectional heads only),
    the measured local dimension of the realisable solution set.

    Returns (table, details) with details[(d_s, layer, head)] = dict(me=..., search=SearchResult).
    """
    rows, details = [], {}
    jobs = [(tr, l, h) for tr in traces for (l, h) in heads]
    for tr, layer, head in tqdm(jobs, desc="realisable search", unit="run", disable=not progress):
        S = tr.n_tokens
        a = tr.attentions[layer, head].double()
        t = tr.values[layer, head].double() @ w_o[layer, head].double()
        vis = visible_mask(S, True) if causal else None
        s_t, s_t1, _ = head_spectra(tr.values[layer, head], w_o[layer, head])
        r_t, r_t1 = int(numerical_rank(s_t)), int(numerical_rank(s_t1))
        me = max_entropy_alternative(a, t, d_q, causal)
        sr = search_realisable(a, t, d_q, causal=causal, steps=steps)
        # started from the keys the search's alternative gains on: then LP >= search >= max-entropy, row-mean-wise
        lp, lp_tv = max_tv_alternative(a, t, vis, rounds=lp_rounds, starts=[sr.a_alt > a], top_start=False)
        me_tv = tv_rows(a, me["a_alt"])
        real = realisability(d_q=d_q, log_probs=torch.log_softmax(sr.q @ sr.k.T / math.sqrt(d_q), -1),
                             causal=causal)
        row = dict(d_s=S, layer=layer, head=head, rank_T=r_t, dim_LN_T1=S - r_t1,
                   expected_dim=expected_dimension(S, d_q, r_t1), naive_dim=max(0, d_q * (S - d_q)),
                   lp_tv_mean=float(lp_tv.mean()), lp_tv_max=float(lp_tv.max()),
                   me_tv_mean=float(me_tv.mean()), me_tv_max=float(me_tv.max()),
                   me_error=rel_output_error(a, me["a_alt"], t),
                   search_tv_mean=sr.tv_mean, search_tv_max=sr.tv_max, search_error=sr.rel_output_error,
                   search_rank=real.rank, search_rejected=sr.rejected_steps,
                   min_prob_A=float(a[vis].min() if vis is not None else a.min()),
                   min_prob_me=float(me["a_alt"][vis].min() if vis is not None else me["a_alt"].min()),
                   min_prob_search=float(sr.a_alt[vis].min() if vis is not None else sr.a_alt.min()),
                   local_dim=None, jacobian_full_row_rank=None)
        if not causal and d_q + 1 <= S <= jacobian_max_length:
            loc = local_solution_dimension(a, t, d_q)
            row.update(local_dim=loc["dimension"], jacobian_full_row_rank=loc["full_row_rank"])
        rows.append(row)
        details[(S, layer, head)] = dict(me=me, search=sr)
    return pd.DataFrame(rows), details
