"""The estimator (``mode="estimate"``): Hutchinson's trace estimator per input token, and its error.

||J||_F² = E ||J v||² for a random v with E[v vᵀ] = I, so m random directions at position j (instead of d
one-hot ones) estimate S[:, :, j] (squared block norms) for every layer and hidden position at once, d/m
times cheaper. Random orthonormal probes scaled by √d (the default) have lower variance than Gaussian ones,
and are exact when m = d.

Its relative variance grows as a block's effective rank falls: on the embedded MiniLM the blocks between
different tokens have effective rank 10–40 (median 12–17 per layer), and 16 probes per token give a median
relative error of c of about 3.2% (95th percentile about 11%), falling roughly like 1/√m: 32 probes
1.9–2.4%, 64 probes 1.6%, 128 probes 0.95% (p95 3.2%) at d_s = 16 and 32 (benchmark). A median of 1%
therefore costs a third of the exact pass, not a twentieth. Deflating a per-token dominant input subspace
(Hutch++-style) did not help at equal cost in a simulation on exact blocks: the subspace that would help
differs per (layer, hidden token), and finding it needs reverse passes per input token.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from .result import HTAResult


def random_probes(n: int, e: int, m: int, probe: str, seed: int) -> torch.Tensor:
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
        q, r = torch.linalg.qr(z[:, s : s + e].transpose(1, 2))  # (n, e, k) orthonormal columns
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(1)  # Haar-distributed
        blocks.append(q.transpose(1, 2))
    return (torch.cat(blocks, 1) * math.sqrt(e)).float()


def estimate_error(exact: Iterable[HTAResult], estimated: Iterable[HTAResult]) -> dict:
    """How far an estimate of c is from exact c, over layers ≥ 1, pooled over sentences.

    Returns:
        median, p95, max: relative error |c_est − c| / c over the entries with c > 0 (causal models:
            later tokens contribute exactly nothing);
        signed_median: the median of (c_est − c) / c: S is estimated without bias, but c takes its square
            root and normalises, so its estimate is off centre by what this measures;
        per_layer_median: the median relative error per layer;
        abs_median, abs_p95: absolute error |c_est − c| (c is a share in [0, 1]);
        row_l1_median: median over hidden tokens of Σ_j |c_est − c|, the contribution mass misassigned;
        top_agreement: share of (layer, hidden token) rows whose most-contributing input token is the
            same in both; entries: how many entries were compared.
    """
    errs, signed, absd, l1, layers, same, rows = [], [], [], [], [], 0, 0
    for ex, es in zip(exact, estimated):
        c0, c1 = ex.c[1:], es.c[1:]
        keep = c0 > 0
        e = (c1 - c0).abs() / c0.where(keep, torch.ones_like(c0))
        errs.append(e[keep])
        signed.append(((c1 - c0) / c0.where(keep, torch.ones_like(c0)))[keep])
        absd.append((c1 - c0).abs()[keep])
        l1.append((c1 - c0).abs().sum(-1).flatten())
        layers.append(torch.arange(1, c0.shape[0] + 1).reshape(-1, 1, 1).expand_as(c0)[keep])
        same += int((c0.argmax(-1) == c1.argmax(-1)).sum())
        rows += c0.shape[0] * c0.shape[1]
    e, lay, a, l1 = torch.cat(errs).double(), torch.cat(layers), torch.cat(absd).double(), torch.cat(l1).double()
    q = lambda v, p: float(v.sort().values[int(p * (v.numel() - 1))])  # noqa: E731 (no size limit)
    return {
        "median": q(e, 0.5),
        "p95": q(e, 0.95),
        "max": float(e.max()),
        "signed_median": q(torch.cat(signed).double(), 0.5),
        "per_layer_median": [q(e[lay == layer], 0.5) for layer in sorted(set(lay.tolist()))],
        "abs_median": q(a, 0.5),
        "abs_p95": q(a, 0.95),
        "row_l1_median": q(l1, 0.5),
        "top_agreement": same / max(rows, 1),
        "entries": int(e.numel()),
    }


def error_by_length(exact: list[HTAResult], estimated: list[HTAResult]) -> tuple[dict[str, dict], dict[str, float]]:
    """:func:`estimate_error` apart for each sentence length (the estimator's error grows with d_s), and the
    mean seconds of the exact pass at that length: ({'<d_s> tokens': error dict}, {'<d_s> tokens': seconds}),
    shortest first. ``exact`` and ``estimated``: the same sentences, in the same order."""
    errors, seconds = {}, {}
    for n in sorted({r.n_tokens for r in exact}):
        idx = [i for i, r in enumerate(exact) if r.n_tokens == n]
        errors[f"{n} tokens"] = estimate_error([exact[i] for i in idx], [estimated[i] for i in idx])
        seconds[f"{n} tokens"] = sum(exact[i].seconds for i in idx) / len(idx)
    return errors, seconds


def estimate_pairs(
    exact: Iterable[HTAResult], estimated: Iterable[HTAResult], sample: int = 2500, seed: int = 0, digits: int = 5
):
    """Exact and estimated c side by side, one row per entry of layers ≥ 1 with c > 0 (a random sample).

    Returns:
        a data frame with columns exact, estimate, layer: at most ``sample`` rows (drawn with ``seed``),
        rounded to ``digits`` (what chapter 6's scatter plot draws).
    """
    import numpy as np
    import pandas as pd

    pts = []
    for ex, es in zip(exact, estimated):
        a, b = ex.c[1:].numpy(), es.c[1:].numpy()  # (L, n, n) each
        layer = np.broadcast_to(np.arange(1, a.shape[0] + 1)[:, None, None], a.shape)
        pts.append(pd.DataFrame({"exact": a.ravel(), "estimate": b.ravel(), "layer": layer.ravel()}))
    pts = pd.concat(pts)
    pts = pts[pts.exact > 0]
    return pts.sample(min(len(pts), sample), random_state=seed).round(digits)


def block_ranks(J: torch.Tensor) -> torch.Tensor:
    """The effective rank r = (Σσ²)² / Σσ⁴ of each Jacobian block of one hidden token.

    One Gaussian probe v estimates ||B||_F² by ||B v||² with relative variance 2 ||BᵀB||_F² / ||B||_F⁴ = 2/r,
    so the estimator's noise on a block grows as its effective rank falls (r = d for a multiple of an
    orthogonal matrix, 1 for rank one).

    Args:
        J: (d, d_s, d) with J[k, j, m] = ∂e_i[k] / ∂x_j[m], every block of hidden token i, as one batched
            reverse-mode call gives them.
    Returns:
        (d_s,) r for each input token j.
    """
    B = J.detach().permute(1, 0, 2).double()  # (d_s, d, d): block j
    fro2 = B.pow(2).sum((1, 2))
    return fro2.square() / (B.transpose(1, 2) @ B).pow(2).sum((1, 2))
