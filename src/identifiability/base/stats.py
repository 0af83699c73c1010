"""Intervals shared by the chapters: the :class:`Interval` a study measures, seeded sentence-level bootstraps
and the builders that turn per-unit values into an Interval, how many sentences would settle a question, and
the power of a band test. Every verdict's interval comes from here."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .digits import fmt

LEVEL = 0.95
RESAMPLES = 2000
# statistics that reduce along an axis: all resamples are reduced in one call, not one Python call per resample
# (a chapter asks for thousands of intervals; the numbers are the same to the bit)
AXIS_REDUCTIONS = (np.mean, np.median, np.nanmean, np.nanmedian)


@dataclass(frozen=True)
class Interval:
    """A measured quantity: its estimate, 95% interval and the number of independent units behind it."""

    estimate: float
    low: float
    high: float
    n: int = 0  # units (sentences, inputs) the interval resamples; 0 when exact
    unit: str = "units"  # what they are, plural ("test sentences", "heads"): the page and the reasons name it

    def __str__(self) -> str:
        """How a page prints it: three significant digits, the interval and its units."""
        if not self.has_interval:
            return f"{fmt(self.estimate)} (no interval: {self.count})"
        units = f", {self.count}" if self.n else ""
        return f"{fmt(self.estimate)} (95% interval {fmt(self.low)} to {fmt(self.high)}{units})"

    @property
    def count(self) -> str:
        """'16 test sentences', '1 test sentence'."""
        return f"{self.n} {self.unit[:-1] if self.n == 1 and self.unit.endswith('s') else self.unit}"

    @classmethod
    def exact(cls, value: float) -> Interval:
        return cls(value, value, value, 0)

    @property
    def has_interval(self) -> bool:
        """False where the bounds are missing (NaN): too few units were measured to resample."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def side(self, threshold: float) -> str:
        """'above', 'below' or 'contains' for ``threshold``."""
        if self.low > threshold:
            return "above"
        if self.high < threshold:
            return "below"
        return "contains"


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
    if statistic in AXIS_REDUCTIONS:
        vectorised = lambda x, axis: statistic(x, axis=axis)  # noqa: E731
    else:
        vectorised = lambda x, axis: np.apply_along_axis(statistic, axis, x)  # noqa: E731
    res = bootstrap(
        (v,),
        vectorised,
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


# --------------------------------------------------------------------------------------------------
# per-unit values -> Interval
# --------------------------------------------------------------------------------------------------


def unit_interval(n: int, statistic: Callable[[np.ndarray], float], seed: int = 0, unit: str = "inputs") -> Interval:
    """A statistic of ``n`` units and its bootstrap interval, resampling the units: ``statistic`` takes an
    (n,) array of unit indices (drawn with replacement) and returns the statistic of those units, so
    statistics of several paired arrays (a rank correlation) resample their units together; ``unit`` names them."""
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, n=0, unit=unit)
    est = float(statistic(np.arange(n)))
    low, high = bootstrap_ci(np.arange(n), lambda idx: statistic(idx.astype(int)), seed)
    return Interval(est, low, high, n=n, unit=unit)


def paired_interval(a, b, seed: int = 0, unit: str = "sentences") -> Interval:
    """The mean of ``a - b`` over paired units (``unit``: sentences or tokens), with its interval over them
    (:func:`paired_ci`); ``n`` counts the units where both are measured."""
    n = int(np.isfinite(np.asarray(a, float) - np.asarray(b, float)).sum())
    return Interval(*paired_ci(a, b, seed=seed), n=n, unit=unit)


def mean_interval(values: Sequence[float], seed: int = 0, unit: str = "sentences") -> Interval | None:
    """The mean of per-unit values (differences) with its interval (NaN bounds from one unit: too few to
    resample); None with no unit at all."""
    if not len(values):
        return None
    return paired_interval(values, np.zeros(len(values)), seed, unit)


def difference_interval(a: Sequence[float], b: Sequence[float], seed: int = 0, unit: str = "tokens") -> Interval | None:
    """The mean of ``a`` minus the mean of ``b``, two groups of units pooled, with an interval that resamples
    the units of both together, each keeping its group (a resample that draws one group only has no
    difference: NaN). None when either group is empty."""
    if not (len(a) and len(b)):
        return None
    rows = [np.array([[v, kind]]) for values, kind in ((a, 1.0), (b, 0.0)) for v in values]

    def gap(v: np.ndarray) -> float:  # NaN for a resample that drew one group only
        first = v[:, 1] == 1
        return float(v[first, 0].mean() - v[~first, 0].mean()) if 0 < first.sum() < len(v) else math.nan

    est, lo, hi = grouped_ci(rows, gap, seed=seed)
    return Interval(est, lo, hi, n=len(rows), unit=unit)


def hierarchical_interval(values: np.ndarray, levels: int, seed: int = 0, unit: str = "test sentences") -> Interval:
    """Mean of ``values`` (*seeds, sentences) with an interval resampling ``levels`` seed axes and the
    sentences (:func:`hierarchical_ci`); ``n`` counts the sentences."""
    return Interval(*hierarchical_ci(values, levels, seed=seed), n=values.shape[levels], unit=unit)


def unpaired_difference(a: Interval, b: Interval) -> Interval:
    """a - b with the two 95% half-widths combined in quadrature (two independent runs; conservative for runs
    on the same test sentences, whose errors correlate positively)."""
    half = math.hypot((a.high - a.low) / 2, (b.high - b.low) / 2)
    d = a.estimate - b.estimate
    return Interval(d, d - half, d + half, min(a.n, b.n), a.unit)


# --------------------------------------------------------------------------------------------------
# the power of a band test: how many sentences make "inside ±band" likely at a true 0
# --------------------------------------------------------------------------------------------------


def _z(power: float, level: float) -> float:
    """band / sqrt(V) that gives ``power``: the estimate at a true 0 is N(0, V) and the band test holds when
    |estimate| + z_level sqrt(V) <= band, so P(holds) = 2 Phi(band / sqrt(V) - z_level) - 1."""
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2) + norm.ppf(0.5 + power / 2))


def chance_of_holding(seed_var: float, sentence_var: float, sentences: int, band: float, level: float = LEVEL) -> float:
    """The chance that an interval lies inside ±``band`` when the true difference is 0, with ``sentences``
    test sentences: the estimate's variance is V = seed_var + sentence_var / sentences, and the interval
    (estimate ± z sqrt(V)) lies inside ±band with probability 2 Phi(band / sqrt(V) - z) - 1 (0 when negative)."""
    from scipy.stats import norm

    v = seed_var + sentence_var / max(sentences, 1)
    if v <= 0:
        return 1.0
    return max(0.0, float(2 * norm.cdf(band / math.sqrt(v) - norm.ppf(0.5 + level / 2)) - 1))


def sentences_for_power(
    seed_var: float, sentence_var: float, band: float, power: float, level: float = LEVEL
) -> int | None:
    """How many test sentences give the band test a ``power`` chance of holding when the true difference is 0
    (:func:`chance_of_holding`): V(n) = seed_var + sentence_var / n must reach (band / k)^2 with
    k = z_level + z_power (3.24 for 95% and 80%), so n = sentence_var / ((band / k)^2 - seed_var). None when
    the seeds' part alone exceeds (band / k)^2: more seeds are needed, not more sentences."""
    target = (band / _z(power, level)) ** 2
    if seed_var >= target:
        return None
    return max(2, math.ceil(sentence_var / (target - seed_var)))


# --------------------------------------------------------------------------------------------------
# the power of a test for a change: how likely a change of a given size gives an interval excluding 0
# --------------------------------------------------------------------------------------------------


def rate_variance(rate: float, tokens: Sequence[int] | np.ndarray) -> float:
    """The variance of a rate measured as the mean over sentences of each sentence's share of identified
    tokens, when every token is identified independently with probability ``rate``: a sentence of t_s tokens
    has variance rate (1 - rate) / t_s, and the mean of n sentences rate (1 - rate) / n² · Σ_s 1 / t_s.

    Args:
        tokens: (n,) the number of test tokens of each test sentence.
    """
    t = np.asarray(tokens, dtype=float)
    t = t[t > 0]
    if t.size == 0:
        return math.nan
    return float(rate * (1 - rate) * np.sum(1 / t) / t.size**2)


def power_to_detect(difference: float, variance: float, level: float = LEVEL) -> float:
    """The chance that an interval estimate ± z sqrt(V) (z for ``level``) excludes 0 when the true difference
    is ``difference`` and the estimate's variance is ``variance``: the estimate is N(difference, V), so the
    chance is Φ(|difference| / sqrt(V) - z) + Φ(-|difference| / sqrt(V) - z). 1 when V is 0 and the
    difference is not; NaN when V is unknown. This is the normal approximation the rules state; a percentile
    bootstrap of few sentences' differences of one sign (a reference at the ceiling can only lose) may differ
    from it either way."""
    from scipy.stats import norm

    if not math.isfinite(variance):
        return math.nan
    if variance <= 0:
        return 1.0 if difference else 0.0
    z, x = float(norm.ppf(0.5 + level / 2)), abs(difference) / math.sqrt(variance)
    return float(norm.cdf(x - z) + norm.cdf(-x - z))
