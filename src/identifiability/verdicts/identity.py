"""Claims about token identity (chapters 4 and 5): C6, C7 and C8."""

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
# C6-C8: token identity (chapters 4, 5)
# --------------------------------------------------------------------------------------------------

C6_HOLDS, C6_PARTLY = 0.85, 0.70  # last-layer rate: the paper's 93% (12 layers), 8 points of tolerance


def judge_c6(last_rate: Interval, shuffled_rate: float, rule: str) -> Verdict:
    """C6: tokens stay identifiable at the last layer (linear map, cosine lookup)."""
    note = "the same probe trained on shuffled labels"
    base = dict(
        threshold=C6_HOLDS,
        claim="C6",
        estimate=last_rate.estimate,
        ci95=(last_rate.low, last_rate.high),
        baseline=shuffled_rate,
        baseline_note=note,
        rule=rule,
    )
    if last_rate.low >= C6_HOLDS:
        return Verdict(verdict=HOLDS, reason=f"the interval lies at or above {C6_HOLDS:g}", **base)
    if last_rate.high < C6_PARTLY:
        return Verdict(verdict=FAILS, reason=f"the interval lies below {C6_PARTLY:g}", **base)
    if last_rate.low >= C6_PARTLY and last_rate.high < C6_HOLDS:
        return Verdict(verdict=PARTLY, reason=f"the interval lies in [{C6_PARTLY:g}, {C6_HOLDS:g})", **base)
    edge = C6_HOLDS if last_rate.low < C6_HOLDS <= last_rate.high else C6_PARTLY
    _, why = interval_verdict(last_rate, edge, "above")
    return Verdict(verdict=INCONCLUSIVE, reason=why, **base)


def judge_c7(last_minus_first: Interval, chance: float, rule: str) -> Verdict:
    """C7: without a learned map identifiability decays from the first encoder layer to the last."""
    v, why = interval_verdict(last_minus_first, 0.0, "below")
    return Verdict(
        "C7",
        v,
        last_minus_first.estimate,
        (last_minus_first.low, last_minus_first.high),
        chance,
        "chance: one over the tokens of a sentence",
        rule,
        why,
        threshold=0.0,
    )


C8_ANGLE_SLACK = 0.02  # unit-normalised probes may lose this much against raw probes
C8_NORM_CHANCE = 0.05  # norm-only probes must stay within this of chance
C8_BASELINE_NOTE = "none for a difference of two probes; the norm-only probe is held to chance inside the rule"
C8_MIN_SPREAD = 0.05  # relative norm spread (IQR / median) below which the magnitude part is not testable


def judge_c8(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
) -> Verdict:
    """C8: identity lives in the angle, not the magnitude."""
    va, whya = interval_verdict(unit_minus_raw, -C8_ANGLE_SLACK, "above")
    vn, whyn = interval_verdict(norm_only_minus_chance, C8_NORM_CHANCE, "below")
    angle = HOLDS if (va, vn) == (HOLDS, HOLDS) else FAILS if FAILS in (va, vn) else INCONCLUSIVE
    parts = [
        part_verdict(
            "C8", "angle", unit_minus_raw, angle, f"direction only: {whya}; norm only: {whyn}", rule, -C8_ANGLE_SLACK
        )
    ]
    if norm_spread < C8_MIN_SPREAD or norm_adds is None:
        parts.append(
            part_verdict(
                "C8",
                "magnitude",
                None,
                NOT_TESTABLE,
                f"relative norm spread {norm_spread:.1%} < {C8_MIN_SPREAD:.0%}: LayerNorm fixes the norm",
                rule,
            )
        )
        if angle == HOLDS:
            return Verdict(
                "C8",
                HOLDS,
                unit_minus_raw.estimate,
                (unit_minus_raw.low, unit_minus_raw.high),
                None,
                C8_BASELINE_NOTE,
                rule,
                parts[0].reason + "; magnitude: not testable",
                tuple(parts),
            )
        return combine_parts(
            "C8",
            parts[:1],
            rule,
            unit_minus_raw,
            None,
            C8_BASELINE_NOTE,
        )
    # the claim is that the norm adds little: holds when the norm's contribution stays below the slack
    vm, whym = interval_verdict(norm_adds, C8_ANGLE_SLACK, "below")
    parts.append(part_verdict("C8", "magnitude", norm_adds, vm, whym, rule, C8_ANGLE_SLACK))
    return combine_parts(
        "C8",
        parts,
        rule,
        unit_minus_raw,
        None,
        C8_BASELINE_NOTE,
    )
