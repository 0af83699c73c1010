"""What C4, C5 and C18 read (chapter 3, effective attention), built by
:mod:`identifiability.studies.effective_attention`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..base.stats import Interval


@dataclass(frozen=True)
class C4Evidence:
    """What C4's rules read, built by ``studies.effective_attention.c4_evidence`` from one row per input and head.

    Attributes:
        identical_at_or_below_dv: Pearson(A, A_eff) = 1 (to 1e-9) for every head with an empty LN(T) of every
            input with d_s <= d_v (version 3 of the rule).
        min_at_or_below_dv: the smallest of those correlations (None without such inputs).
        deficient_at_or_below_dv: head-inputs at d_s <= d_v whose T is numerically rank-deficient (non-empty
            LN(T)): left out of the check, counted on the page.
        diverges: some input with d_s > d_v has a median Pearson over heads below 1 - 1e-9.
        trend: Spearman correlation of d_s and the input's median Pearson over heads (inputs with d_s > d_v),
            its interval over inputs.
        beyond: mean over inputs with d_s >= d_v + 2 of the median over heads of Pearson(A, A_eff) minus
            Pearson(A, A projected onto a random subspace of the same rank), interval over inputs.
        beyond_random_weights: the same against the random value weights' effective attention.
        trend_by_heads, beyond_by_heads: ``trend`` and ``beyond`` with intervals over heads.
        random_trend: ``trend``'s estimate for the random-subspace projection (the baseline).
        identical_below_dv, median_longest, paired_longest, random_median_longest: the original rule's inputs
            (A_eff = A for d_s < d_v; the median Pearson at the longest length and the mean over heads of the
            paired difference there, intervals over inputs; the random projection's median there).
    """

    identical_at_or_below_dv: bool
    min_at_or_below_dv: float | None
    deficient_at_or_below_dv: int
    diverges: bool
    trend: Interval
    beyond: Interval
    beyond_random_weights: Interval
    trend_by_heads: Interval
    beyond_by_heads: Interval
    random_trend: float | None
    identical_below_dv: bool
    median_longest: Interval
    paired_longest: Interval
    random_median_longest: float


@dataclass(frozen=True)
class C5Category:
    """One special-token category's evidence, built by ``studies.effective_attention.c5_category``.

    Attributes:
        category: "start", "end separator" or "middle separator".
        token: the tokenizer's spelling ([CLS], </s>, ...).
        separator: whether the category is a separator (the claim's token).
        peak: median over inputs of the mean raw mass per query row on the category, in units of the
            uniform share (its tokens / d_s).
        ratio: per input, the effective mass on the category over its raw mass, each summed over heads,
            layers and query rows; interval over inputs.
        vs_random: that ratio minus the random subspace's, per input; interval over inputs.
        random: the random subspace's ratio, mean over inputs.
        ratio_by_heads, vs_random_by_heads: the same two with intervals over heads.
        inputs: what an input is ("sentences", "sentence pairs").
    """

    category: str
    token: str
    separator: bool
    peak: float
    ratio: Interval
    vs_random: Interval
    random: float
    ratio_by_heads: Interval
    vs_random_by_heads: Interval
    inputs: str = "sentences"

    @property
    def label(self) -> str:
        return f"{self.category} ({self.token})" if self.token else self.category


def sink_of(categories: Sequence[C5Category]) -> C5Category | None:
    """The special token with the largest raw peak: the one that carries the model's attention sink."""
    return max(categories, key=lambda c: c.peak, default=None)


@dataclass(frozen=True)
class C5Original:
    """The original rule's inputs (rows of effective attention normalised to sum to one): the separator's
    ratio to its raw mass and that ratio minus the random subspace's, per sentence; the same for the largest
    structural peak where it is not the separator (``peak_*``, None otherwise); the random ratio."""

    separator_ratio: Interval | None
    separator_vs_random: Interval | None
    peak_token: str
    peak_ratio: Interval | None
    peak_vs_random: Interval | None
    random_ratio: float | None


@dataclass(frozen=True)
class C5Evidence:
    """What C5's rules read: the special-token categories (start token and end separator on single
    sentences, the middle separator on pairs) and the original rule's inputs."""

    categories: tuple[C5Category, ...]
    original: C5Original


@dataclass(frozen=True)
class C18Evidence:
    """What C18 reads: every special-token category C5 measures (the start token and the end separator on
    single sentences, the middle separator on pairs), the same per-category measurements; the sink is the
    one with the largest raw peak (:func:`sink_of`)."""

    categories: tuple[C5Category, ...]

    @property
    def sink(self) -> C5Category | None:
        return sink_of(self.categories)
