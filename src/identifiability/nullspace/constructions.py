"""Constructed alternatives: bases of the left null space of T and of [T, 1], alternative attention matrices
with the same head output (the paper's proof, made numerical), and the exact d_s = d_v + 1 threshold cases.

A head's output is ``A @ T`` with A (d_s, d_s) row-stochastic and T = V_h W_O^h (d_s, d) (the paper's
T = E W_V H). Any A' with the same row sums and A'T = AT is an alternative attention with identical output;
the rows of A' - A then lie in the left null space of the augmented matrix [T, 1]. Everything runs in float64;
ranks follow the book's one rule (:mod:`identifiability.base.linalg`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..base.linalg import matrix_rtol, numerical_rank, one_thread
from .common import SHRINK, rel_output_error, tv_rows

# ------------------------------------------------------------------------------------------- bases


def output_basis(t: torch.Tensor, rtol: float | None = None, augmented: bool = False) -> torch.Tensor:
    """Orthonormal basis (d_s, r) of col(T), or of col([T, 1]) if ``augmented``; from a float64 SVD."""
    t = t.double()
    if augmented:
        s0 = torch.linalg.svdvals(t)[0] if t.numel() else torch.tensor(1.0, dtype=t.dtype)
        t = torch.cat([t, torch.full((t.shape[0], 1), float(s0) / math.sqrt(t.shape[0]), dtype=t.dtype)], 1)
    u, s, _ = torch.linalg.svd(t, full_matrices=False)
    return u[:, : int(numerical_rank(s, matrix_rtol(t, rtol)))]


def left_null_basis(t: torch.Tensor, rtol: float | None = None, augmented: bool = True) -> torch.Tensor:
    """Orthonormal basis (d_s, k) of the left null space LN([T, 1]) (or LN(T)); k = d_s - rank."""
    t = t.double()
    if augmented:
        s0 = torch.linalg.svdvals(t)[0]
        t = torch.cat([t, torch.full((t.shape[0], 1), float(s0) / math.sqrt(t.shape[0]), dtype=t.dtype)], 1)
    u, s, _ = torch.linalg.svd(t, full_matrices=True)
    return u[:, int(numerical_rank(s, matrix_rtol(t, rtol))) :]


def _row_null_bases(t: torch.Tensor, visible: torch.Tensor | None, rtol: float | None) -> list[torch.Tensor]:
    """Per query row, an orthonormal basis (d_s, k_i) of the row's admissible perturbations: vectors supported on
    the keys it can see, orthogonal to 1 and to the visible rows of T. One shared basis without a mask."""
    n = t.shape[0]
    if visible is None or bool(visible.all()):
        return [left_null_basis(t, rtol)] * n
    bases = []
    for i in range(n):
        idx = visible[i].nonzero().squeeze(1)
        nb = left_null_basis(t[idx], rtol)
        full = torch.zeros(n, nb.shape[1], dtype=nb.dtype)
        full[idx] = nb
        bases.append(full)
    return bases


# --------------------------------------------------------------------------- 2. constructed alternatives


def _largest_step(a: torch.Tensor, d: torch.Tensor, cap: float = math.inf) -> torch.Tensor:
    """Per row, the largest t <= cap with a + t d >= 0, shrunk by ``SHRINK`` (rows (d_s,), a and d (d_s, d_s))."""
    neg = d < 0
    ratio = torch.where(neg, a / (-d).where(neg, torch.ones_like(d)), torch.full_like(a, math.inf))
    t = ratio.min(1).values.clamp(max=cap)
    return t * (1 - SHRINK)


@one_thread
def construct_alternative(
    a: torch.Tensor, t: torch.Tensor, visible: torch.Tensor | None = None, seed: int = 0, rtol: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's construction: for each row a random direction in LN([T, 1]), scaled to the largest step that
    keeps A + Ã >= 0.

    Args:
        a: (d_s, d_s) attention (float64, strictly positive on visible keys).
        t: (d_s, d) the head's T.
        visible: (d_s, d_s) bool mask of the keys each row may use (causal models); None = all.

    Returns:
        (A + Ã, step) with step (d_s,) the scale per row (0 for rows whose null space is empty, e.g. every row
        when d_s <= rank(T) + 1).
    """
    a = a.double()
    n = a.shape[0]
    g = torch.Generator().manual_seed(seed)
    bases = _row_null_bases(t, visible, rtol)
    d = torch.zeros(n, n, dtype=a.dtype)
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


def _row_aug_bases(
    t: torch.Tensor, visible: torch.Tensor | None, rtol: float | None
) -> list[torch.Tensor] | torch.Tensor:
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


@one_thread
def max_tv_alternative(
    a: torch.Tensor,
    t: torch.Tensor,
    visible: torch.Tensor | None = None,
    rtol: float | None = None,
    rounds: int = 2,
    starts: Sequence[torch.Tensor] = (),
    top_start: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """How different can an output-preserving, row-stochastic alternative be? Per row, a large total-variation
    distance found by linear programming (a lower bound on the maximum: TV is convex, so maximising it is not an
    LP; we alternate between fixing the set of keys that gain mass and solving the LP for that set).

    Round 1 moves as much mass as possible away from each row's strongest key; later rounds take the keys
    that gained mass as the new set. ``starts`` adds further initial sets, (d_s, d_s) bool each (e.g. the keys
    a known alternative B gains on, B > A: then the result is at least as far from A as B, row by row). The
    LP's solution satisfies the constraints only to the solver's tolerance (~1e-9), so its direction is
    projected exactly onto LN([T, 1]) and re-scaled to stay >= 0.

    Returns (A', tv) with A' (d_s, d_s) and tv (d_s,) per row.
    """
    from scipy import sparse
    from scipy.optimize import linprog

    a = a.double()
    n = a.shape[0]
    vis = visible if visible is not None else torch.ones(n, n, dtype=torch.bool)
    ub = _row_aug_bases(t, visible, rtol)
    shared = isinstance(ub, torch.Tensor)
    if shared and ub.shape[1] >= n:  # d_s <= rank([T,1]): A is the only solution
        return a.clone(), torch.zeros(n, dtype=a.dtype)
    blocks = [ub.T.numpy()] * n if shared else [u.T.numpy() for u in ub]
    a_eq = sparse.block_diag(blocks, format="csr")
    b_eq = np.concatenate([blk @ a[i].numpy() for i, blk in enumerate(blocks)])
    bounds = np.stack([np.zeros(n * n), np.where(vis.flatten().numpy(), np.inf, 0.0)], 1)
    top = vis.clone()
    top[torch.arange(n), a.masked_fill(~vis, -1).argmax(1)] = False  # everything but the top key
    best, best_tv = a.clone(), torch.zeros(n, dtype=a.dtype)
    for gain in ([top] if top_start else []) + [st & vis for st in starts]:
        for _ in range(rounds):
            res = linprog(-gain.flatten().double().numpy(), A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
            if res.status != 0:
                break
            q = torch.from_numpy(res.x).view(n, n)
            d = (q - a).masked_fill(~vis, 0)
            if shared:
                d = d - (d @ ub) @ ub.T  # exact projection onto LN([T, 1])
            else:
                d = torch.stack([d[i] - (d[i] @ ub[i]) @ ub[i].T for i in range(n)])
            step = _largest_step(a, d, cap=1.0)
            step = torch.where(torch.isfinite(step), step, torch.zeros_like(step))
            cand = a + step[:, None] * d
            tv = tv_rows(a, cand)
            better = tv > best_tv
            best[better], best_tv[better] = cand[better], tv[better]
            gain = (q > a + 1e-12) & vis
    return best, best_tv


def exact_threshold_examples() -> dict:
    """Exact (rational) arithmetic for d_s = 3, d_v = 2, with sympy.

    ``generic``: T of rank 2; all row-stochastic A' with A'T = AT are solved for symbolically; the solution is
    unique (A' = A) because LN(T) is spanned by one x with x·1 != 0.
    ``deficient``: T of rank 1 < d_v; then LN([T,1]) has dimension d_s - rank([T,1]) = 1 and a one-parameter
    family per row remains.
    """
    import sympy as sp

    A = sp.Matrix(
        [
            [sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 6)],
            [sp.Rational(1, 5), sp.Rational(3, 5), sp.Rational(1, 5)],
            [sp.Rational(1, 4), sp.Rational(1, 4), sp.Rational(1, 2)],
        ]
    )
    out = {"A": A}
    for name, T in {
        "generic": sp.Matrix([[1, 2], [3, -1], [2, 5]]),
        "deficient": sp.Matrix([[1, 2], [2, 4], [-1, -2]]),
    }.items():
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
            "T": T,
            "rank_T": T.rank(),
            "LN_T": [list(v) for v in ln],
            "x_dot_1": [sp.nsimplify(sum(v)) for v in ln],
            "dim_LN_T1": len(ln1),
            "solution": Xsol,
            "free_parameters": len(free),
            "unique": len(free) == 0 and Xsol == A,
        }
    return out
