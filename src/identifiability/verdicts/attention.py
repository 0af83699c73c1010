"""Claims about attention (chapters 2 and 3): non-identifiability, the review's objections, effective
attention."""

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
# C1-C3: non-identifiability (chapter 2). Counts over every head: exact, no sampling.
# --------------------------------------------------------------------------------------------------


def judge_c1(min_dim_by_ds: dict[int, int], d_v: int, rule: str) -> Verdict:
    """C1: non-identifiable for every d_s > d_v. ``min_dim_by_ds``: d_s -> smallest dim LN([T,1]) over heads."""
    beyond = {n: k for n, k in min_dim_by_ds.items() if n > d_v}
    if not beyond:
        return Verdict("C1", NOT_TESTABLE, None, None, None, "", rule, f"no input longer than d_v = {d_v} was measured")
    first_ok = min(
        (n for n, k in beyond.items() if k >= 1 and all(kk >= 1 for nn, kk in beyond.items() if nn >= n)), default=None
    )
    baseline = d_v + 2
    note = "the smallest d_s with dim LN([T,1]) = d_s - d_v - 1 >= 1 for a generic T"
    est = None if first_ok is None else float(first_ok)
    if all(k >= 1 for k in beyond.values()):
        return Verdict(
            "C1", HOLDS, est, None, baseline, note, rule, "every head admits alternatives for every d_s > d_v"
        )
    if all(k >= 1 for n, k in beyond.items() if n >= d_v + 2):
        return Verdict(
            "C1",
            PARTLY,
            est,
            None,
            baseline,
            note,
            rule,
            f"alternatives exist from d_s = d_v + 2 = {d_v + 2} on, not at d_s = d_v + 1 (see C2)",
        )
    bad = min(n for n, k in beyond.items() if n >= d_v + 2 and k < 1)
    return Verdict("C1", FAILS, est, None, baseline, note, rule, f"some head at d_s = {bad} admits no alternative")


C2_UNIQUE_SHARE = 0.95  # share of real heads with a single row-stochastic solution at d_s = d_v + 1
C2_FAIL_SHARE = 0.5


def judge_c2(exact_unique: bool, unique_share: float, alternatives_at_dv2: bool, rule: str) -> Verdict:
    """C2 (review): at d_s = d_v + 1 a generic head admits no alternative."""
    x = Interval.exact(unique_share)
    note = "dimension count d_s - d_v - 1 = 0 at d_s = d_v + 1: uniqueness expected for a generic T"
    if unique_share < C2_FAIL_SHARE:
        return Verdict(
            "C2",
            FAILS,
            x.estimate,
            None,
            1.0,
            note,
            rule,
            f"only {unique_share:.0%} of real heads are unique at d_s = d_v + 1",
        )
    if exact_unique and unique_share >= C2_UNIQUE_SHARE and alternatives_at_dv2:
        return Verdict(
            "C2",
            HOLDS,
            x.estimate,
            None,
            1.0,
            note,
            rule,
            f"the exact example and {unique_share:.0%} of real heads are unique at d_s = d_v + 1, "
            "and every head admits alternatives at d_v + 2",
        )
    missing = [
        w
        for w, ok in (
            ("the exact example is not unique", exact_unique),
            (f"only {unique_share:.0%} of heads are unique", unique_share >= C2_UNIQUE_SHARE),
            ("not every head admits alternatives at d_v + 2", alternatives_at_dv2),
        )
        if not ok
    ]
    return Verdict("C2", PARTLY, x.estimate, None, 1.0, note, rule, "; ".join(missing))


C3_FAILING_SHARE = 0.95  # share of the paper's constructed alternatives that must fail the exact test


def judge_c3(real_passes: bool | None, failing_share: float, realisable_everywhere: bool, rule: str) -> Verdict:
    """C3 (review): the paper's alternatives need not be softmax-realisable. ``real_passes`` is None where
    the exact test does not apply (a causal mask makes realisability a low-rank completion problem)."""
    note = (
        "none applies: the test is exact (a rank, not a sample), so there is no chance level; its control is "
        "the real A, which must pass it"
    )
    extra = (
        "; realisable alternatives were nevertheless found for every d_s >= d_v + 2 tried"
        if realisable_everywhere
        else "; realisable alternatives were not found for every d_s >= d_v + 2"
    )
    if real_passes is None:
        return Verdict(
            "C3",
            NOT_TESTABLE,
            None,
            None,
            None,
            note,
            rule,
            "a causal mask leaves the entries above the diagonal free, so the exact test does not apply" + extra,
        )
    if not real_passes:
        return Verdict(
            "C3",
            NOT_TESTABLE,
            failing_share,
            None,
            None,
            note,
            rule,
            "the real attention fails the exact test, so the test cannot judge alternatives" + extra,
        )
    if failing_share >= C3_FAILING_SHARE:
        return Verdict(
            "C3",
            HOLDS,
            failing_share,
            None,
            None,
            note,
            rule,
            f"{failing_share:.0%} of the constructed alternatives are not realisable" + extra,
        )
    verdict = FAILS if failing_share < 0.5 else PARTLY
    return Verdict(
        "C3",
        verdict,
        failing_share,
        None,
        None,
        note,
        rule,
        f"only {failing_share:.0%} of the constructed alternatives fail the test" + extra,
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
