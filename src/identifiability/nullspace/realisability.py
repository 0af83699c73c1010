"""Softmax realisability (the review's first objection): is an alternative attention matrix the softmax of a
rank-d_q logit matrix Q K^T / sqrt(d_q)? An exact test, explicit factors, the maximum-entropy alternative, a
search for realisable alternatives and the local dimension of the solution set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from ..base.linalg import NONLINEAR_RTOL, numerical_rank, one_thread
from .common import SEARCH_TOL, rel_output_error, tv_rows, visible_mask
from .constructions import output_basis

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
    """log(A') with each row's mean removed, (d_s, d_s). Pass ``log_probs`` (e.g. log_softmax of known logits) to
    avoid taking log of probabilities that underflowed."""
    lp = log_probs if log_probs is not None else a.double().log()
    return lp - lp.mean(1, keepdim=True)


def realisability(
    a: torch.Tensor | None = None,
    d_q: int = 64,
    log_probs: torch.Tensor | None = None,
    causal: bool = False,
    rtol: float | None = None,
) -> Realisability:
    """Is A' = softmax(Q'K'^T / sqrt(d_q)) for some Q', K' in R^{n x d_q}?

    Exact criterion (no mask): A' must be strictly positive and M = log(A') - rowmean has rank <= d_q.
    Proof: softmax(L') = A' iff L' = log A' + c 1^T for some c; then M = L'(I - 11^T/d_s), so rank M <= rank L'
    <= d_q; conversely M itself has M 1 = 0 and softmax(M) = A', and any rank-<= d_q matrix is Q'K'^T/sqrt(d_q).

    With a causal mask only the lower triangle of L' is constrained: the question becomes a low-rank *completion*
    problem with no exact rank test, so the answer is None (the chapter says so and checks explicit Q', K'
    instead).
    """
    if causal:
        return Realisability(
            None,
            None,
            "causal mask: the entries above the diagonal are free, so realisability "
            "is a low-rank completion problem; the exact rank test does not apply",
        )
    if log_probs is None:
        a = a.double()
        if bool((a <= 0).any()):
            return Realisability(False, None, f"{int((a <= 0).sum())} entries are 0, but softmax is strictly positive")
    m = centered_log(a, log_probs)
    if not bool(torch.isfinite(m).all()):
        return Realisability(False, None, "log-probabilities not finite: an entry is 0")
    s = torch.linalg.svdvals(m)
    r = int(numerical_rank(s, NONLINEAR_RTOL if rtol is None else rtol))
    ok = r <= d_q
    return Realisability(ok, r, f"rank(log A' - row means) = {r} {'<=' if ok else '>'} d_q = {d_q}", s / s[0])


def attention_from_factors(q: torch.Tensor, k: torch.Tensor, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(A', log A') = softmax(Q K^T / sqrt(d_q)) with an optional causal mask; q, k (d_s, d_q)."""
    logits = q @ k.T / math.sqrt(k.shape[1])
    if causal:
        logits = logits.masked_fill(~visible_mask(q.shape[0], True), -math.inf)
    lp = torch.log_softmax(logits, -1)
    return lp.exp(), lp


def factor_attention(a: torch.Tensor, d_q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Q, K (d_s, d_q) with softmax(Q K^T / sqrt(d_q)) = A, from an SVD of the centred log (bidirectional heads).

    The real head's own Q, K would do as well; factoring A itself needs nothing but A, so it works for any
    model whose A is strictly positive. Raises if A is not realisable with d_q (which would contradict A
    being a softmax attention of this width).
    """
    m = centered_log(a)
    u, s, vh = torch.linalg.svd(m)
    r = int(numerical_rank(s, NONLINEAR_RTOL))
    if r > d_q:
        raise ValueError(f"log A - rowmean has rank {r} > d_q = {d_q}: A is not a d_q-wide softmax attention")
    k = min(d_q, s.shape[0])
    scale = d_q**0.25
    q = torch.zeros(a.shape[0], d_q, dtype=m.dtype)
    kk = torch.zeros(a.shape[0], d_q, dtype=m.dtype)
    q[:, :k] = u[:, :k] * s[:k].sqrt() * scale
    kk[:, :k] = vh[:k].T * s[:k].sqrt() * scale
    return q, kk


def _solve_rows(j: torch.Tensor, g: torch.Tensor, damping: float = 1e-13) -> torch.Tensor:
    """Minimum-norm Levenberg-Marquardt step per row: j (d_s, r, p), g (d_s, r) -> (d_s, p) = J^T (J J^T + λ I)^-1 g."""
    jjt = j @ j.mT
    lam = damping * jjt.diagonal(dim1=-2, dim2=-1).sum(-1).clamp_min(1e-300)
    eye = torch.eye(jjt.shape[-1], dtype=j.dtype)
    y = torch.linalg.solve(jjt + lam[:, None, None] * eye, g.unsqueeze(-1))
    return (j.mT @ y).squeeze(-1)


def _moment_jacobian(p: torch.Tensor, u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """d(p_i U)/d q_i for p_i = softmax(q_i K^T / sqrt(d_q)): U^T (diag p_i - p_i p_i^T) K / sqrt(d_q),
    shape (d_s, r, d_q)."""
    pu = p @ u
    pk = p @ k
    j = (u.T.unsqueeze(0) * p.unsqueeze(1)) @ k  # (d_s, r, d_q) = U^T diag(p_i) K
    return (j - pu.unsqueeze(2) * pk.unsqueeze(1)) / math.sqrt(k.shape[1])


def solve_queries(
    q0: torch.Tensor,
    k: torch.Tensor,
    u: torch.Tensor,
    target: torch.Tensor,
    causal: bool = False,
    iters: int = 30,
    tol: float = 1e-12,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Given keys K, find queries Q (row by row, damped Newton from q0) with softmax(QK^T/sqrt(d_q)) U = target.

    Args: q0, k (d_s, d_q); u (d_s, r) orthonormal basis of col(T); target (d_s, r) = A U.
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


@one_thread
def max_entropy_alternative(
    a: torch.Tensor,
    t: torch.Tensor,
    d_q: int,
    causal: bool = False,
    rtol: float | None = None,
    iters: int = 400,
    tol: float = 1e-12,
) -> dict:
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
    n = a.shape[0]
    u = output_basis(t, rtol)
    r = u.shape[1]
    if r > d_q:
        raise ValueError(f"rank(T) = {r} > d_q = {d_q}: this construction needs d_q >= rank(T)")
    target = a @ u
    scale = target.norm(dim=1).clamp_min(1e-300)
    mask = visible_mask(n, causal)
    w = torch.zeros(n, r, dtype=a.dtype)  # dual variables: logits = w U^T

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
    mu = torch.full((n,), 1e-4, dtype=a.dtype)
    stalled = torch.zeros(n, dtype=torch.bool)
    eye = torch.eye(r, dtype=a.dtype)
    for _ in range(iters):
        res = g.norm(dim=1) / scale
        active = (res > tol) & ~stalled
        if not bool(active.any()):
            break
        pu = p @ u
        h = (u.T.unsqueeze(0) * p.unsqueeze(1)) @ u - pu.unsqueeze(2) * pu.unsqueeze(1)  # Hessian (d_s, r, r)
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
    q = torch.zeros(n, d_q, dtype=a.dtype)
    k = torch.zeros(n, d_q, dtype=a.dtype)
    q[:, :r] = w
    k[:, :r] = u * math.sqrt(d_q)  # logits = Q K^T / sqrt(d_q) = w U^T
    alt, log_alt = attention_from_factors(q, k, causal)
    return dict(
        q=q, k=k, a_alt=alt, log_a_alt=log_alt, residual=float((g.norm(dim=1) / scale).max()), iterations=it + 1
    )


@dataclass
class SearchResult:
    """The best realisable alternative found by :func:`search_realisable` (verified by recomputation)."""

    q: torch.Tensor  # (d_s, d_q)
    k: torch.Tensor  # (d_s, d_q)
    a_alt: torch.Tensor  # (d_s, d_s) = softmax(q k^T / sqrt(d_q)), recomputed
    tv_mean: float
    tv_max: float
    rel_output_error: float
    start_tv_mean: float
    history: list[dict]
    rejected_steps: int


@one_thread
def search_realisable(
    a: torch.Tensor,
    t: torch.Tensor,
    d_q: int,
    causal: bool = False,
    steps: int = 60,
    lr: float = 0.05,
    start: str = "maxent",
    q0: torch.Tensor | None = None,
    k0: torch.Tensor | None = None,
    seed: int = 0,
    tol: float = SEARCH_TOL,
    logit_cap: float = 300.0,
    progress: bool = False,
) -> SearchResult:
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
        a: (d_s, d_s) attention, float64, strictly positive on visible keys. t: (d_s, d) the head's T.
        start: "maxent" (start from :func:`max_entropy_alternative`) or "given" (q0, k0: e.g. the head's own).

    Every accepted iterate is recomputed from (Q', K') and kept as the best if its relative output error is
    <= ``tol``.
    """
    a = a.double()
    u = output_basis(t)
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
    return SearchResult(
        q=q,
        k=k,
        a_alt=alt,
        tv_mean=tvm,
        tv_max=tvx,
        rel_output_error=err,
        start_tv_mean=start_tv,
        history=history,
        rejected_steps=rejected,
    )


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


@one_thread
def local_solution_dimension(a: torch.Tensor, t: torch.Tensor, d_q: int, rtol: float | None = None) -> dict:
    """Measure the dimension of realisable, output-preserving alternatives near A from a Jacobian.

    With (Q, K) factoring A and f(Q, K) = softmax(QK^T/sqrt(d_q)) U (U a basis of col(T)), the solution set
    {f = f(Q, K)} is a manifold of dimension nullity(J) near (Q, K) when J = df has full row rank; the
    reparametrisations (Q G, K G^-T) and (Q, K + 1 w^T) account for d_q^2 + d_q of it. The rest is the
    dimension of the set of realisable A' with the same output. Bidirectional heads only (needs log A).

    Returns dict(rows, rank, full_row_rank, dimension, gap: smallest kept relative singular value).
    """
    a = a.double()
    n = a.shape[0]
    if n < d_q + 1:
        raise ValueError(
            f"d_s = {n} < d_q + 1: every positive row-stochastic matrix is realisable there and the "
            "reparametrisation count d_q^2 + d_q does not apply"
        )
    q, k = factor_attention(a, d_q)
    # Rows of A' - A sum to 0, so (A' - A) T = 0 iff (A' - A) P T = 0 with P the projection onto 1-perp: a basis of
    # col(P T) (dimension rank([T,1]) - 1) gives the output constraints without the redundant row-sum direction.
    t = t.double()
    u = output_basis(t - t.mean(0, keepdim=True), rtol)

    def f(theta):
        qq, kk = theta[: n * d_q].view(n, d_q), theta[n * d_q :].view(n, d_q)
        return (torch.softmax(qq @ kk.T / math.sqrt(d_q), -1) @ u).flatten()

    jac = torch.func.jacrev(f)(torch.cat([q.flatten(), k.flatten()]))
    s = torch.linalg.svdvals(jac)
    rank = int(numerical_rank(s, NONLINEAR_RTOL if rtol is None else rtol))
    return dict(
        rows=jac.shape[0],
        rank=rank,
        full_row_rank=rank == jac.shape[0],
        dimension=jac.shape[1] - rank - d_q * d_q - d_q,
        gap=float(s[rank - 1] / s[0]),
    )
