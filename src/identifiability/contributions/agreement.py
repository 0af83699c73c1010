"""How well one context-mixing measure agrees with a reference, per sentence and layer, and the two nulls the
rules of C22-C27 compare it with.

For one sentence, a measure's array ``m`` and a reference's ``r`` are both (L+1, d_s, d_s) (the registry's
shape). Per layer l, the statistic is the median over hidden tokens i of the Spearman correlation between the
rows m[l, i, :] and r[l, i, :] (over the input tokens); the nulls are the same statistic for the measure's rows
shuffled among the sentence's hidden tokens (a derangement: no row keeps its own token), and for the
distance-only baseline c[i, j] proportional to 1 / (1 + |i - j|). Top-1 agreement and top-3 overlap are
reported beside it. A constant row (a one-token row, or a layer-0 identity row) has no correlation: NaN, left
out of the median.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata


@dataclass(frozen=True)
class SentenceAgreement:
    """One sentence's agreement of a measure with a reference, per layer 0..L (layer 0 is NaN: both are the
    identity there).

    Attributes:
        spearman: (L+1,) median over hidden tokens of the per-row Spearman correlation.
        shuffled: (L+1,) the statistic of the measure's rows shuffled among the hidden tokens (the first null).
        distance: (L+1,) the statistic of the distance-only baseline (the second null).
        spearman_no_own, shuffled_no_own, distance_no_own: the same three with each row's own token left out.
        top1: (L+1,) share of hidden tokens whose largest contributor is the same in both.
        top3: (L+1,) mean share of the three largest contributors the two have in common.
    """

    spearman: np.ndarray
    shuffled: np.ndarray
    distance: np.ndarray
    spearman_no_own: np.ndarray
    shuffled_no_own: np.ndarray
    distance_no_own: np.ndarray
    top1: np.ndarray
    top3: np.ndarray


def row_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of each pair of rows (ties get their average rank).

    Args:
        a, b: (..., n) arrays of the same shape.
    Returns:
        (...,) correlations; NaN where a row is constant.
    """
    ra, rb = rankdata(a, axis=-1), rankdata(b, axis=-1)
    ra = ra - ra.mean(-1, keepdims=True)
    rb = rb - rb.mean(-1, keepdims=True)
    den = np.sqrt((ra**2).sum(-1) * (rb**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def _median(x: np.ndarray) -> np.ndarray:
    """Median over the last axis ignoring NaN; NaN where a whole row of values is NaN."""
    out = np.full(x.shape[:-1], np.nan)
    ok = np.isfinite(x).any(-1)
    out[ok] = np.nanmedian(x[ok], axis=-1)
    return out


def without_own(c: np.ndarray) -> np.ndarray:
    """Each row with its own token (the diagonal) removed: (..., n, n) -> (..., n, n - 1)."""
    n = c.shape[-1]
    keep = ~np.eye(n, dtype=bool)
    return c[..., keep].reshape(*c.shape[:-2], n, n - 1)


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random permutation of range(n) with no fixed point (n >= 2)."""
    if n < 2:
        raise ValueError("a derangement needs at least 2 tokens")
    while True:
        p = rng.permutation(n)
        if not (p == np.arange(n)).any():
            return p


def distance_baseline(n: int, layers: int) -> np.ndarray:
    """The distance-only baseline: c[l, i, j] = (1 / (1 + |i - j|)) / row sum, the same at every layer 1..L,
    the identity at layer 0. Returns (layers + 1, n, n)."""
    i = np.arange(n)
    d = 1.0 / (1.0 + np.abs(i[:, None] - i[None, :]))
    out = np.broadcast_to(d / d.sum(-1, keepdims=True), (layers + 1, n, n)).copy()
    out[0] = np.eye(n)
    return out


def _top_k_overlap(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """(..., n) rows -> (...,) share of the k largest entries of a that are among the k largest of b."""
    k = min(k, a.shape[-1])
    ta = np.argsort(-a, axis=-1, kind="stable")[..., :k]
    tb = np.argsort(-b, axis=-1, kind="stable")[..., :k]
    return (ta[..., :, None] == tb[..., None, :]).any(-1).mean(-1)


def agreement(measure: np.ndarray, reference: np.ndarray, seed: int = 0) -> SentenceAgreement:
    """The statistic, its two nulls and the top-k agreements of one sentence (module docstring).

    Args:
        measure, reference: (L+1, d_s, d_s) contributions of one sentence, d_s >= 3.
        seed: seed of the row shuffle (one derangement per layer).
    """
    m, r = np.asarray(measure, float), np.asarray(reference, float)
    if m.shape != r.shape or m.ndim != 3 or m.shape[1] != m.shape[2]:
        raise ValueError(f"measure and reference must both be (L+1, d_s, d_s), got {m.shape} and {r.shape}")
    n_layers, n = m.shape[0] - 1, m.shape[-1]
    if n < 3:
        raise ValueError(f"a sentence needs at least 3 tokens to rank contributions, got {n}")
    rng = np.random.default_rng(seed)
    shuffled = np.stack([m[k][derangement(n, rng)] for k in range(n_layers + 1)])
    dist = distance_baseline(n, n_layers)
    stats = [_median(row_spearman(x, r)) for x in (m, shuffled, dist)]
    stats += [_median(row_spearman(without_own(x), without_own(r))) for x in (m, shuffled, dist)]
    stats += [(m.argmax(-1) == r.argmax(-1)).mean(-1), _top_k_overlap(m, r, 3).mean(-1)]
    stats = [x.astype(float) for x in stats]
    for x in stats:
        x[0] = np.nan  # layer 0: both are the identity
    return SentenceAgreement(*stats)
