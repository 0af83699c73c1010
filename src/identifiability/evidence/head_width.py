"""What C19, C20 and C21 read (chapter 7, head width: predictions across the family of head widths pre-trained
here, :mod:`identifiability.pretrain.family`), built by :mod:`identifiability.studies.head_width`.

Each claim's evidence lists every model measured, trained members and untrained twins alike, with what decides
whether it is judged (its held-out accuracy gain over the unigram baseline): the verdict decides that with the
rule's constant, so an undertrained member is reported, not silently dropped."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..base.stats import Interval


@dataclass(frozen=True)
class FamilyModel:
    """One model of the family: a pre-trained member or a member's untrained twin.

    Attributes:
        name: the model's folder name (``mlm-w128-dv32-seed0``, its twin ``mlm-w128-dv32-seed0-init``).
        member: the family member it belongs to (its own name; a twin's trained member's name).
        d_v: value width, ``width // heads``.
        width: hidden size d.
        heads: attention heads per layer.
        seed: pre-training seed.
        trained_enough: the provenance's flag (a twin: its member's); the verdicts decide with ``accuracy_gain``
            where it is known.
        twin: an untrained twin (weights before step 0), never a judged member.
        accuracy_gain: held-out masked-token accuracy minus the unigram baseline's (fractions; None: unknown,
            and for a twin).
        entropy: mean attention entropy in nats over heads, layers and query rows (shown beside C20 and C21);
            None where not measured.
    """

    name: str
    member: str
    d_v: int
    width: int
    heads: int
    seed: int
    trained_enough: bool
    twin: bool
    accuracy_gain: float | None = None
    entropy: float | None = None


@dataclass(frozen=True)
class C19Model:
    """One model's threshold measurement (chapter 2's, on its own d_v).

    Attributes:
        model: the model.
        margins: one row per (input, layer, head) of ``nullspace.threshold_margins`` on inputs of exactly
            d_v + 1 tokens, with ``text`` (the input) and ``sentence`` (the sentence it was cut from) columns:
            ``rank_T1``, ``d_s``, ``sigma_min_T1``.
        sentences: how many different sentences those inputs were cut from.
        alternatives_at_dv2: every head on every input of d_v + 2 tokens has dim LN([T, 1]) >= 1 (None: no
            input of d_v + 2 tokens was measured).
    """

    model: FamilyModel
    margins: pd.DataFrame
    sentences: int
    alternatives_at_dv2: bool | None


@dataclass(frozen=True)
class C19Evidence:
    """What C19 reads: every model's threshold measurement (members and twins)."""

    models: tuple[C19Model, ...]


@dataclass(frozen=True)
class C20Pair:
    """D(first) - D(second) with its 95% bootstrap interval over inputs (paired: the same inputs resampled for
    both), D the mean over the common range's inputs of the per-input paired difference."""

    first: str
    second: str
    difference: Interval


@dataclass(frozen=True)
class C20Comparison:
    """One comparison of C20: the compared members, their common d_s / d_v range and the differences of D.

    Attributes:
        members: names of the compared members (trained, seed 0, one width unless the robustness 'members'
            adds the half-width member).
        ratio_range: (largest (d_v + 2) / d_v, smallest longest d_s / d_v) over the compared members.
        lengths: the fewest distinct input lengths d_s any compared member (or seed) has in the common range.
        d: per model measured (members, the second seed, twins) D with its interval over inputs.
        pairs: D(m) - D(m') for every pair of compared members.
        twin_pairs: the same differences between the members' untrained twins (the baseline).
        seed_difference: |D(seed 0) - D(seed 1)| of the member pre-trained with two seeds, interval over inputs
            (its upper end is the bound B); None without two seeds.
        seeds: the names of those two models (seed 0, seed 1); () without two seeds.
    """

    members: tuple[str, ...]
    ratio_range: tuple[float, float]
    lengths: int
    d: dict[str, Interval]
    pairs: tuple[C20Pair, ...]
    twin_pairs: tuple[C20Pair, ...]
    seed_difference: Interval | None
    seeds: tuple[str, ...] = ()


@dataclass(frozen=True)
class C20Evidence:
    """What C20 reads: every model measured, the comparison of the rule (the members of one width) and the
    robustness 'members' comparison (the half-width member with two heads of 32 added; None where it was not
    measured)."""

    models: tuple[FamilyModel, ...]
    comparison: C20Comparison
    with_half_width: C20Comparison | None = None


@dataclass(frozen=True)
class C21Model:
    """One model's offset beyond dimension counting, over its inputs with d_s >= d_v + 2.

    Attributes:
        model: the model.
        sub: D_sub, the mean over inputs of the per-input paired difference (median over heads of Pearson(A,
            A_eff) minus Pearson(A, A projected onto a random subspace of the same rank)), interval over inputs.
        val: D_val, the same against random value weights (the same E, a random W_V and W_O).
        sub_by_heads, val_by_heads: the same two with intervals over heads (robustness 'unit').
    """

    model: FamilyModel
    sub: Interval
    val: Interval
    sub_by_heads: Interval
    val_by_heads: Interval


@dataclass(frozen=True)
class C21Evidence:
    """What C21 reads: every model's D_sub and D_val (members and twins)."""

    models: tuple[C21Model, ...]


@dataclass(frozen=True)
class ResplitEvidence:
    """What C28-C32 read: the re-split family's recorded run (the book's model re-split into other head widths
    and healed, issue 55), one entry per member with its fidelity and the chapters' evidence on it. Empty until
    `make resplit` records the family: the claims' rules were frozen before any claim quantity was computed on a
    healed member, so until then each verdict is "not run in this build".

    Attributes:
        members: each member's recorded results ({"name", "d_v", "healed", "fidelity", ...}); () when the family
            has not been recorded.
    """

    members: tuple[dict, ...] = ()
