"""Intervals shared by the chapters: seeded sentence-level bootstraps and how many sentences would settle a
question. Every verdict's interval comes from here."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.mean,
    seed: int = 0,
    level: float = LEVEL,
    n_resamples: int = RESAMPLES,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over independent units (sentences, inputs), seeded.

    Args:
        values: (n,) one value per unit; NaNs are dropped.
    Returns:
        (low, high); NaN when fewer than two units remain: one unit has no spread to resample, and a zero-width
        interval would pass for certainty (a verdict on it is inconclusive, :mod:`identifiability.verdicts`).
    """
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (math.nan, math.nan)
    if v.size < 2:
        return (math.nan, math.nan)
    if np.all(v == v[0]):  # every resample is the same: the interval is the statistic
        s = float(statistic(v))
        return (s, s)
    res = bootstrap(
        (v,),
        lambda x, axis: np.apply_along_axis(statistic, axis, x),
        confidence_level=level,
        n_resamples=n_resamples,
        method="percentile",
        random_state=np.random.default_rng(seed),
        vectorized=True,
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def grouped_ci(
    groups: Sequence[np.ndarray],
    statistic: Callable[[np.ndarray], float] = np.median,
    seed: int = 0,
    level: float = LEVEL,
    n_resamples: int = RESAMPLES,
) -> tuple[float, float, float]:
    """(estimate, low, high) of ``statistic`` over all values pooled, with an interval that resamples whole
    groups (a sentence with all of its heads): values of one sentence are not independent. With one group the
    bounds are NaN (see :func:`bootstrap_ci`)."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not groups:
        return (math.nan, math.nan, math.nan)
    est = float(statistic(np.concatenate(groups)))
    if len(groups) < 2:
        return (est, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(n_resamples, len(groups)))
    stats = np.array([statistic(np.concatenate([groups[k] for k in row])) for row in picks])
    alpha = (1 - level) / 2
    return (est, float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha)))


def paired_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.mean,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(estimate, low, high) of ``statistic(a - b)`` over paired units (the same sentence measured twice)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    lo, hi = bootstrap_ci(d, statistic, seed)
    return float(statistic(d[np.isfinite(d)])), lo, hi


def units_to_settle(n: int, ci: tuple[float, float], estimate: float, threshold: float) -> int | None:
    """How many units an interval like ``ci`` (from ``n`` units) would need to clear ``threshold``: the
    half-width shrinks like 1/sqrt(n), so n * (half-width / distance)^2. None if the estimate sits on it."""
    distance = abs(estimate - threshold)
    half = (ci[1] - ci[0]) / 2
    if distance == 0 or not math.isfinite(half):
        return None
    return max(n + 1, math.ceil(n * (half / distance) ** 2))


def hierarchical_resamples(values: np.ndarray, levels: int, seed: int = 0, n_resamples: int = RESAMPLES) -> np.ndarray:
    """Bootstrap resamples of a mean over seeds and sentences, resampling every level: first the seeds of each
    of ``levels`` leading axes (fine-tune seeds, probe seeds), then the sentences, which are shared by every
    seed (the same test sentence measured under each seed: resampled once per draw, so differences stay paired).

    Args:
        values: (*seeds, n, *rest): ``levels`` seed axes, n sentences, then axes kept apart (e.g. layers).
            NaNs (a sentence a run did not measure) are left out of the means.
    Returns:
        (n_resamples, *rest): the mean over the resampled seeds and sentences, per draw. Joint statements
        (e.g. where the largest of several layers lies) are read from the same draws.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim < levels + 1:
        raise ValueError(f"values need {levels} seed axes and a sentence axis, got shape {v.shape}")
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, *v.shape[levels + 1 :]))
    for r in range(n_resamples):
        picked = v
        for axis in range(levels + 1):
            picked = np.take(picked, rng.integers(0, v.shape[axis], v.shape[axis]), axis=axis)
        out[r] = np.nanmean(picked.reshape(-1, *v.shape[levels + 1 :]), axis=0)
    return out


def hierarchical_ci(
    values: np.ndarray, levels: int, seed: int = 0, level: float = LEVEL, n_resamples: int = RESAMPLES
) -> tuple[float, float, float]:
    """(estimate, low, high) of the mean of ``values`` (*seeds, n) with an interval from
    :func:`hierarchical_resamples`; NaN bounds with fewer than two sentences (see :func:`bootstrap_ci`)."""
    v = np.asarray(values, dtype=float)
    est = float(np.nanmean(v))
    if v.shape[levels] < 2:
        return (est, math.nan, math.nan)
    draws = hierarchical_resamples(v, levels, seed, n_resamples)
    alpha = (1 - level) / 2
    return (est, float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha)))
