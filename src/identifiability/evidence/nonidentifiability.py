"""What C1 to C3 read (chapter 2, non-identifiability), built by :mod:`identifiability.studies.nonidentifiability`.

Exact counts over every head, no sampling: the tables are the raw per-head measurements, which the rules
count under their tolerances and shares."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class C1Evidence:
    """What C1's rule reads: the null-space survey.

    Attributes:
        table: one row per (text, layer, head) of ``nullspace.null_space_table``: ``d_s``, ``dim_LN_T1`` and
            ``kept_min_T1`` (the smallest singular value of [T, 1] counted in its rank, relative to the largest).
            The lengths measured are its ``d_s`` values: a length with no input has no row (C1's amended rule
            is not testable without d_v + 1 or d_v + 2).
        d_v: the value width.
    """

    table: pd.DataFrame
    d_v: int


@dataclass(frozen=True)
class C2Evidence:
    """What C2's rules read, built by ``studies.nonidentifiability.c2_evidence``.

    Attributes:
        exact_unique: the exact rational example at d_s = 3, d_v = 2 admits only A' = A.
        margins: one row per (input, layer, head) of ``nullspace.threshold_margins`` on inputs of d_v + 1
            tokens, with a ``text`` column naming the input: ``rank_T1``, ``d_s``, ``sigma_min_T1``.
        alternatives_at_dv2: every head of the survey at d_s = d_v + 2 has dim LN([T, 1]) >= 1.
        share_one_text: the share of heads with rank([T, 1]) = d_s on the first input, no margin (the original
            rule's estimate).
    """

    exact_unique: bool
    margins: pd.DataFrame
    alternatives_at_dv2: bool
    share_one_text: float


@dataclass(frozen=True)
class C3Evidence:
    """What C3's rule reads, built by ``studies.nonidentifiability.c3_evidence``.

    Attributes:
        real_passes: every real A of the text passes the exact realisability test (None: a causal model, where
            the test does not apply); the rule's control.
        failing_share: the share of the paper's tested alternatives (full and half step, every head) that fail
            the test.
        accepted_tv_by_ds: each searched length d_s >= d_v + 2 -> the smallest, over the searched heads, mean
            row TV from A of the realisable alternative the search found there (0 for a head whose alternative
            the exact test did not accept): reported beside the verdict, not part of it.
    """

    real_passes: bool | None
    failing_share: float
    accepted_tv_by_ds: dict[int, float]


@dataclass(frozen=True)
class C15Evidence:
    """What C15's rule reads: the null-space survey's table (``nullspace.null_space_table``), one row per
    (text, layer, head) with ``dim_LN_T``, ``bound_T``, ``dim_LN_T1``, ``bound_T1`` and the smallest singular
    values counted, ``kept_min_T`` and ``kept_min_T1`` (relative to the largest), and the value width ``d_v``."""

    table: pd.DataFrame
    d_v: int


@dataclass(frozen=True)
class C16Evidence:
    """What C16's rule reads, from the realisable search (``studies.nonidentifiability.realisable_search``).

    Attributes:
        accepted_tv_by_ds: each searched length d_s >= d_v + 2 -> the smallest, over the searched heads, mean
            row TV from A of the realisable alternative found there (0 where the exact test did not accept it).
        threshold_tv_by_ds: each searched length d_s <= d_v + 1 -> the largest, over the searched heads, mean
            row TV from A of a realisable alternative (the max-entropy one or the search's).
        dimensions: per (length, head) whose local solution dimension was measured: (d_s, the measured
            dimension, the count d_q(d_s - d_q - 1)).
        search_steps: the search's budget, its Adam steps per searched length and head (one start each, the
            max-entropy alternative): a length where it found nothing is unresolved, and the reason names it.
    """

    accepted_tv_by_ds: dict[int, float]
    threshold_tv_by_ds: dict[int, float]
    dimensions: tuple[tuple[int, int, int], ...]
    search_steps: int


@dataclass(frozen=True)
class C17Evidence:
    """What C17's rule reads, built by ``studies.nonidentifiability.c17_evidence``.

    Attributes:
        margins: as :attr:`C2Evidence.margins`: every head on inputs of d_v + 1 tokens.
        alternatives_at_dv2: every head of the survey at d_s = d_v + 2 has dim LN([T, 1]) >= 1; None when the
            survey holds no text of d_v + 2 tokens.
        rank_full_share: the share of the survey's (text, head) pairs with rank(T) = min(d_s, d_v).
    """

    margins: pd.DataFrame
    alternatives_at_dv2: bool | None
    rank_full_share: float
