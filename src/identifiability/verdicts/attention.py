"""Claims about attention (chapters 2 and 3): non-identifiability, the review's objections, effective
attention."""

from __future__ import annotations

from .core import (
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    PARTLY,
    Interval,
    Verdict,
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
