"""What C6 and C7 read (chapter 4, token identity), built by :mod:`identifiability.studies.token_identity`."""

from __future__ import annotations

from dataclasses import dataclass

from ..base.stats import Interval


@dataclass(frozen=True)
class C6Evidence:
    """What C6's rules read, built by ``studies.token_identity.identity_claims``; rates are of the last layer's
    linear map with cosine loss and lookup, per test sentence.

    Attributes:
        rate: the rate, interval over probe seeds and test sentences (hierarchical bootstrap).
        over_position: the per-sentence rate minus the position-only lookup's, same resampling.
        over_shuffled: the per-sentence rate minus the shuffled-label probe's (robustness 'null').
        rate_seed0, over_position_seed0: ``rate`` and ``over_position`` of probe seed 0 alone, interval over
            sentences only (robustness 'unit').
        position_rate, shuffled_rate, chance: the baselines (position-only lookup, shuffled-label probe, a
            uniform guess among the sentence's tokens).
        original_rate: the pre-registered interval: per token the share of seeds that identify it,
            sentences resampled.
    """

    rate: Interval
    over_position: Interval
    over_shuffled: Interval
    rate_seed0: Interval
    over_position_seed0: Interval
    position_rate: float
    shuffled_rate: float
    chance: float
    original_rate: Interval


@dataclass(frozen=True)
class C7Evidence:
    """What C7's rule reads, built by ``studies.token_identity.c7_evidence``: per test token, identified by
    the identity map (cosine lookup) at the last layer minus at layer 1.

    Attributes:
        drop: the mean of that difference, interval over test sentences.
        drop_by_token: the same, interval over test tokens (robustness 'unit').
        chance: one over the tokens of a sentence, averaged over the test tokens (the baseline).
    """

    drop: Interval
    drop_by_token: Interval
    chance: float
