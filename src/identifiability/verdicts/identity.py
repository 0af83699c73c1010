"""Claims about token identity (chapters 4 and 5): C6, C7 and C8.

Each judge takes its thresholds as keyword arguments defaulting to the constants below, so a robustness
alternative of ``data/claims.csv`` is the same judge with a moved threshold (or with other evidence: another
null, another unit of resampling, built by the study). ``judge_c6_original`` and ``judge_c8_original`` keep
the pre-registered rules of the two amended claims."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    PARTLY,
    Interval,
    Quantity,
    Verdict,
    amended,
    combine_parts,
    interval_verdict,
    part_verdict,
    with_robustness,
)
from .text import fmt, pct

# --------------------------------------------------------------------------------------------------
# C6, C7: token identity per layer (chapter 4)
# --------------------------------------------------------------------------------------------------

C6_HOLDS, C6_PARTLY = 0.85, 0.70  # last-layer rate: the paper's 93% (12 layers), 8 points of tolerance
C6_SHIFT = 0.05  # the robustness alternatives move both bounds up or down by this much
C7_SHIFT = 0.02  # the robustness alternative asks the naive drop to lie below -C7_SHIFT instead of 0
C6_QUANTITY = Quantity(
    "last-layer identifiability rate: share of test tokens the learned linear map and cosine lookup identify",
    r"r^{L}",
)
C7_QUANTITY = Quantity(
    "naive identifiability rate (nearest neighbour of e_i^l itself) at the last layer minus at layer 1",
    r"r_{\mathrm{naive}}^{L} - r_{\mathrm{naive}}^{1}",
)
C7_CHANCE = Quantity("chance identifiability rate, one over the tokens of a sentence (a rate, not a change)", r"1/d_s")

C6_NULLS = {
    "position": "the position-only lookup: the mean input embedding of each token's position (training "
    "sentences), looked up among its sentence's tokens",
    "shuffled": "the same probe trained on shuffled labels",
}


def _bands(rate: Interval, holds: float, partly: float) -> tuple[str, str]:
    """The rate's side of C6's two bounds: holds at or above ``holds``, partly in [partly, holds), fails
    below ``partly``, inconclusive when the interval straddles either (with the units that would settle it)."""
    if not rate.has_interval:
        return interval_verdict(rate, holds, "above")
    if rate.low >= holds:
        return HOLDS, f"the interval lies at or above {holds:g}"
    if rate.high < partly:
        return FAILS, f"the interval lies below {partly:g}"
    if rate.low >= partly and rate.high < holds:
        return PARTLY, f"the interval lies in [{partly:g}, {holds:g})"
    edge = holds if rate.low < holds <= rate.high else partly
    return INCONCLUSIVE, interval_verdict(rate, edge, "above")[1]


def judge_c6(
    last_rate: Interval,
    over_null: Interval,
    null_rate: float,
    rule: str,
    *,
    null: str = "position",
    chance: float | None = None,
    shuffled_rate: float | None = None,
    holds: float = C6_HOLDS,
    partly: float = C6_PARTLY,
) -> Verdict:
    """C6 (amended): tokens stay identifiable at the last layer (linear map, cosine lookup) beyond position.

    Args:
        last_rate: the last-layer rate (its interval resamples probe seeds and test sentences).
        over_null: the per-sentence difference rate minus the null's rate, same resampling.
        null_rate: the null's rate: the position-only lookup (``null="position"``) or the shuffled-label
            probe (``null="shuffled"``, the robustness alternative).
        chance, shuffled_rate: shown beside the position-only baseline.
    """
    others = [
        f"{name} {fmt(x)}" for name, x in (("chance", chance), ("shuffled-label probe", shuffled_rate)) if x is not None
    ]
    note = C6_NULLS[null] + (f"; beside it: {', '.join(others)}" if others and null == "position" else "")
    name = {"position": "position-only lookup", "shuffled": "shuffled-label probe"}[null]
    base = dict(
        claim="C6",
        estimate=last_rate.estimate,
        ci95=(last_rate.low, last_rate.high),
        baseline=null_rate,
        baseline_note=note,
        rule=rule,
        threshold=holds,
        estimate_of=C6_QUANTITY,
    )
    if not (last_rate.has_interval and over_null.has_interval):
        return Verdict(verdict=INCONCLUSIVE, reason=interval_verdict(last_rate, holds, "above")[1], **base)
    side = over_null.side(0.0)
    if side != "above":
        where = "lies below 0" if side == "below" else "contains 0"
        why = f"not above the {name}: the interval of the per-sentence difference {where}"
        return Verdict(verdict=FAILS, reason=why, **base)
    v, why = _bands(last_rate, holds, partly)
    above = f"above the {name} by {fmt(over_null.estimate)} (interval {fmt(over_null.low)} to {fmt(over_null.high)})"
    return Verdict(verdict=v, reason=f"{why}; {above}", **base)


def judge_c6_original(last_rate: Interval, shuffled_rate: float, rule: str) -> Verdict:
    """C6's pre-registered rule: the last-layer rate (seeds averaged per token, sentences resampled) against
    0.85 and 0.70, the shuffled-label probe as baseline and nothing to beat."""
    v, why = _bands(last_rate, C6_HOLDS, C6_PARTLY)
    return Verdict(
        "C6",
        v,
        last_rate.estimate,
        (last_rate.low, last_rate.high),
        shuffled_rate,
        C6_NULLS["shuffled"],
        rule,
        why,
        threshold=C6_HOLDS,
        estimate_of=C6_QUANTITY,
    )


@dataclass(frozen=True)
class C6Evidence:
    """What C6's rules read, built by ``studies.identity.identity_claims``; rates are of the last layer's
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


def c6_verdict(e: C6Evidence, rule: str, original_rule: str) -> Verdict:
    """C6 under the rule in force, with its robustness alternatives (``threshold up``, ``threshold down``,
    ``null``, ``unit``) and the original rule's verdict."""
    kw = dict(chance=e.chance, shuffled_rate=e.shuffled_rate)
    v = judge_c6(e.rate, e.over_position, e.position_rate, rule, **kw)
    alternatives = {
        "threshold up": judge_c6(
            e.rate, e.over_position, e.position_rate, rule, **kw, holds=C6_HOLDS + C6_SHIFT, partly=C6_PARTLY + C6_SHIFT
        ),
        "threshold down": judge_c6(
            e.rate, e.over_position, e.position_rate, rule, **kw, holds=C6_HOLDS - C6_SHIFT, partly=C6_PARTLY - C6_SHIFT
        ),
        "null": judge_c6(e.rate, e.over_shuffled, e.shuffled_rate, rule, null="shuffled", chance=e.chance),
        "unit": judge_c6(e.rate_seed0, e.over_position_seed0, e.position_rate, rule, **kw),
    }
    return amended(with_robustness(v, alternatives), judge_c6_original(e.original_rate, e.shuffled_rate, original_rule))


def judge_c7(last_minus_first: Interval, chance: float, rule: str, *, bound: float = 0.0) -> Verdict:
    """C7: without a learned map identifiability decays from the first encoder layer to the last: holds when
    the interval of (rate at L) - (rate at layer 1) lies below ``bound`` (0; the alternative -C7_SHIFT), fails
    when it lies at or above it (the rule's words: an interval [0, 0], no token lost, fails)."""
    x = last_minus_first
    if x.has_interval and x.low == bound:
        v, why = FAILS, f"the interval lies at or above {bound:g}"
    else:
        v, why = interval_verdict(x, bound, "below")
    return Verdict(
        "C7",
        v,
        last_minus_first.estimate,
        (last_minus_first.low, last_minus_first.high),
        chance,
        "chance: one over the tokens of a sentence",
        rule,
        why,
        threshold=bound,
        estimate_of=C7_QUANTITY,
        baseline_of=C7_CHANCE,
    )


def c7_verdict(by_sentence: Interval, by_token: Interval, chance: float, rule: str) -> Verdict:
    """C7 with its robustness alternatives: ``threshold`` (below -C7_SHIFT) and ``unit`` (``by_token``: the
    same difference with an interval over tokens instead of sentences)."""
    alternatives = {
        "threshold": judge_c7(by_sentence, chance, rule, bound=-C7_SHIFT),
        "unit": judge_c7(by_token, chance, rule),
    }
    return with_robustness(judge_c7(by_sentence, chance, rule), alternatives)


# --------------------------------------------------------------------------------------------------
# C8: angle versus magnitude (chapter 5)
# --------------------------------------------------------------------------------------------------

C8_ANGLE_SLACK = 0.02  # unit-normalised probes may lose this much against raw probes; the norm may add this
C8_NORM_CHANCE = 0.05  # norm-only probes must stay within this of chance
C8_BASELINE_NOTE = "none for a difference of two probes; the norm-only probe is held to chance inside the rule"
C8_MIN_SPREAD = 0.05  # relative norm spread (IQR / median) below which the magnitude part is not testable
C8_ANGLE_SLACK_ALT = 0.05  # robustness: unit-normalised probes may lose 5 points
C8_MIN_SPREAD_ALT = 0.02  # robustness: the magnitude part judged from a 2% spread
ANGLE_ONLY = "angle part only"
C8_ANGLE_Q = Quantity(
    "identifiability rate of direction-only (unit-vector) probes minus raw probes', last layer",
    r"r_{e/\lVert e\rVert} - r_{e}",
)
C8_NORM_Q = Quantity(
    "rate of unit-vector probes given the norm as one more input minus without it",
    r"r_{e/\lVert e\rVert,\,\lVert e\rVert} - r_{e/\lVert e\rVert}",
)


def _c8_parts(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
    angle_slack: float,
    norm_chance: float,
    min_spread: float,
    magnitude_slack: float,
) -> list[Verdict]:
    """C8's angle part and its magnitude part (NOT_TESTABLE where the norms barely vary)."""
    va, whya = interval_verdict(unit_minus_raw, -angle_slack, "above")
    vn, whyn = interval_verdict(norm_only_minus_chance, norm_chance, "below")
    angle = HOLDS if (va, vn) == (HOLDS, HOLDS) else FAILS if FAILS in (va, vn) else INCONCLUSIVE
    parts = [
        part_verdict(
            "C8",
            "angle",
            unit_minus_raw,
            angle,
            f"direction only minus raw {unit_minus_raw}: {whya}; norm only minus chance {norm_only_minus_chance}: "
            f"{whyn}",
            rule,
            -angle_slack,
            C8_ANGLE_Q,
        )
    ]
    if norm_spread < min_spread or norm_adds is None:
        why = f"relative norm spread {pct(norm_spread)} < {min_spread:.0%}: LayerNorm fixes the norm"
        parts.append(part_verdict("C8", "magnitude", None, NOT_TESTABLE, why, rule))
    else:
        # the claim is that the norm adds little: holds when the norm's contribution stays below the slack
        vm, whym = interval_verdict(norm_adds, magnitude_slack, "below")
        parts.append(part_verdict("C8", "magnitude", norm_adds, vm, whym, rule, magnitude_slack, C8_NORM_Q))
    return parts


def judge_c8(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
    *,
    angle_slack: float = C8_ANGLE_SLACK,
    norm_chance: float = C8_NORM_CHANCE,
    min_spread: float = C8_MIN_SPREAD,
    magnitude_slack: float = C8_ANGLE_SLACK,
) -> Verdict:
    """C8 (amended): identity lives in the angle, not the magnitude. Holds only if both parts hold; with the
    magnitude part not testable and the angle part holding it partly holds, qualified "angle part only"."""
    parts = _c8_parts(
        unit_minus_raw,
        norm_only_minus_chance,
        norm_spread,
        norm_adds,
        rule,
        angle_slack,
        norm_chance,
        min_spread,
        magnitude_slack,
    )
    if parts[1].verdict == NOT_TESTABLE:
        v = combine_parts("C8", parts[:1], rule, unit_minus_raw, None, C8_BASELINE_NOTE)
        reason = f"{v.reason}; magnitude: not testable ({parts[1].reason})"
        if v.verdict == HOLDS:
            return Verdict(
                "C8",
                PARTLY,
                v.estimate,
                v.ci95,
                None,
                C8_BASELINE_NOTE,
                rule,
                reason,
                tuple(parts),
                qualifier=ANGLE_ONLY,
                estimate_of=C8_ANGLE_Q,
            )
        parts_ = tuple(parts)
        return Verdict(
            "C8", v.verdict, v.estimate, v.ci95, None, C8_BASELINE_NOTE, rule, reason, parts_, estimate_of=C8_ANGLE_Q
        )
    return replace(combine_parts("C8", parts, rule, unit_minus_raw, None, C8_BASELINE_NOTE), estimate_of=C8_ANGLE_Q)


def judge_c8_original(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
) -> Verdict:
    """C8's pre-registered rule: as :func:`judge_c8`, but an untestable magnitude part with the angle part
    holding gives a bare "holds"."""
    v = judge_c8(unit_minus_raw, norm_only_minus_chance, norm_spread, norm_adds, rule)
    if v.qualifier == ANGLE_ONLY:
        return replace(v, verdict=HOLDS, qualifier="")
    return v


@dataclass(frozen=True)
class C8Evidence:
    """What C8's rules read at the last layer, built by ``studies.geometry.c8_evidence``; per test sentence
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


def c8_verdict(e: C8Evidence, rule: str, original_rule: str) -> Verdict:
    """C8 under the rule in force, with its robustness alternatives (``slack``, ``spread``, ``unit``) and the
    original rule's verdict."""
    args = (e.unit_minus_raw, e.norm_vs_chance, e.norm_spread, e.norm_adds, rule)
    alternatives = {
        "slack": judge_c8(*args, angle_slack=C8_ANGLE_SLACK_ALT),
        "spread": judge_c8(*args, min_spread=C8_MIN_SPREAD_ALT),
        "unit": judge_c8(e.unit_minus_raw_seed0, e.norm_vs_chance_seed0, e.norm_spread, e.norm_adds_seed0, rule),
    }
    original = judge_c8_original(e.unit_minus_raw, e.norm_vs_chance, e.norm_spread, e.norm_adds, original_rule)
    return amended(with_robustness(judge_c8(*args), alternatives), original)
