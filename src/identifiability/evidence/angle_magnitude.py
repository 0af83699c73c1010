"""What C8 reads (chapter 5, angle and magnitude), built by :mod:`identifiability.studies.angle_magnitude`."""

from __future__ import annotations

from dataclasses import dataclass

from ..base.stats import Interval


@dataclass(frozen=True)
class C8Evidence:
    """What C8's rules read at the last layer, built by ``studies.angle_magnitude.c8_evidence``; per test sentence
    the share of its tokens each probe identifies.

    Attributes:
        unit_minus_raw: unit-vector probes minus raw probes (cosine loss and lookup), interval over probe
            seeds and test sentences (hierarchical bootstrap).
        norm_vs_chance: the norm-only probe minus chance (1/d_s of each sentence), same resampling.
        norm_adds: unit vectors with the norm as one more input minus unit vectors alone, same resampling.
        norm_spread: interquartile range over median of |e_i^L| (test tokens).
        unit_minus_raw_seed0, norm_vs_chance_seed0, norm_adds_seed0: the three of probe seed 0 alone, interval
            over sentences only (robustness 'unit').
    """

    unit_minus_raw: Interval
    norm_vs_chance: Interval
    norm_adds: Interval
    norm_spread: float
    unit_minus_raw_seed0: Interval
    norm_vs_chance_seed0: Interval
    norm_adds_seed0: Interval
