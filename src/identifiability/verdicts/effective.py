"""Claims about effective attention (chapter 3): C4 and C5."""

from __future__ import annotations

from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    PARTLY,
    Interval,
    Verdict,
    combine_parts,
    interval_verdict,
    part_verdict,
)

# --------------------------------------------------------------------------------------------------
# C4, C5: effective attention (chapter 3)
# --------------------------------------------------------------------------------------------------

C4_PEARSON = 0.9  # median Pearson(A, A_eff) at the longest length must lie below this


def judge_c4(
    identical_below_dv: bool, median_longest: Interval, paired_vs_random: Interval, random_median: float, rule: str
) -> Verdict:
    """C4: raw and effective attention diverge beyond d_v, and more than a random subspace of the same rank does."""
    if not identical_below_dv:
        p1 = part_verdict(
            "C4", "decorrelation", median_longest, FAILS, "A_eff differs from A for some d_s <= d_v", rule
        )
    else:
        v, why = interval_verdict(median_longest, C4_PEARSON, "below")
        p1 = part_verdict("C4", "decorrelation", median_longest, v, why, rule, C4_PEARSON)
    v, why = interval_verdict(paired_vs_random, 0.0, "below")
    p2 = part_verdict("C4", "beyond dimension counting", paired_vs_random, v, why, rule, 0.0)
    return combine_parts(
        "C4",
        [p1, p2],
        rule,
        median_longest,
        random_median,
        "median Pearson(A, A projected onto a random subspace of the same rank)",
    )


C5_RATIO = 0.5  # effective mass / raw mass of [SEP] must lie below this


def judge_c5(
    sep_ratio: Interval | None,
    sep_vs_random: Interval | None,
    peak_token: str,
    peak_ratio: Interval | None,
    peak_vs_random: Interval | None,
    random_ratio: float | None,
    rule: str,
) -> Verdict:
    """C5: the [SEP] peak lies largely in the null space. ``*_ratio``: effective (rows normalised) / raw mass;
    ``*_vs_random``: that ratio minus the random-subspace one, per sentence. ``peak_*``: this model's largest
    special-token peak when it is another token than the separator (None otherwise)."""
    note = "the same ratio for projection onto a random subspace of the same rank"
    if sep_ratio is None:
        return Verdict(
            "C5",
            NOT_TESTABLE,
            None,
            None,
            random_ratio,
            note,
            rule,
            "this tokenizer adds no [SEP]-like separator token to a sentence",
        )
    v1, why1 = interval_verdict(sep_ratio, C5_RATIO, "below")
    v2, why2 = (
        interval_verdict(sep_vs_random, 0.0, "below")
        if sep_vs_random is not None
        else (INCONCLUSIVE, "no random-subspace baseline was measured")
    )
    parts = [
        part_verdict("C5", "[SEP] mostly null", sep_ratio, v1, why1, rule, C5_RATIO),
        part_verdict("C5", "beyond a random subspace", sep_vs_random, v2, why2, rule, 0.0),
    ]
    combined = combine_parts("C5", parts, rule, sep_ratio, random_ratio, note)
    if combined.verdict in (FAILS, INCONCLUSIVE) and peak_ratio is not None and peak_vs_random is not None:
        pv, pwhy = interval_verdict(peak_ratio, C5_RATIO, "below")
        pr, prwhy = interval_verdict(peak_vs_random, 0.0, "below")
        if pv == HOLDS and pr == HOLDS:
            pwhy = f"{pwhy}, and below the random subspace's"
            return Verdict(
                "C5",
                PARTLY,
                combined.estimate,
                combined.ci95,
                random_ratio,
                note,
                rule,
                f"not for [SEP] ({combined.reason}), but for this model's largest peak, {peak_token} ({pwhy})",
                tuple(parts),
            )
    return combined
