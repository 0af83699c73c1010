"""Claims about token identity (chapter 4): C6 and C7.

Each judge takes its thresholds as keyword arguments defaulting to the constants below, so a robustness
alternative of ``data/claims.csv`` is the same judge with a moved threshold (or with other evidence: another
null, another unit of resampling, built by the study). ``judge_c6_original`` keeps the pre-registered
rule of the amended claim; the entry points :func:`c6` and :func:`c7` assemble them from the evidence."""

from __future__ import annotations

from ..base.digits import fmt
from ..base.stats import Interval
from ..evidence.token_identity import C6Evidence, C7Evidence
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    PARTLY,
    Quantity,
    Rules,
    Verdict,
    amended,
    interval_verdict,
    with_robustness,
)

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


def c6(evidence: C6Evidence, rules: Rules) -> Verdict:
    """C6 under the rule in force, with its robustness alternatives (``threshold up``, ``threshold down``,
    ``null``, ``unit``) and the original rule's verdict."""
    e, rule = evidence, rules.rule
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
    original = judge_c6_original(e.original_rate, e.shuffled_rate, rules.pre_registered)
    return amended(with_robustness(v, alternatives), original)


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


def c7(evidence: C7Evidence, rules: Rules) -> Verdict:
    """C7 with its robustness alternatives: ``threshold`` (below -C7_SHIFT) and ``unit`` (the same
    difference with an interval over tokens instead of sentences)."""
    by_sentence, by_token, chance, rule = evidence.drop, evidence.drop_by_token, evidence.chance, rules.rule
    alternatives = {
        "threshold": judge_c7(by_sentence, chance, rule, bound=-C7_SHIFT),
        "unit": judge_c7(by_token, chance, rule),
    }
    return with_robustness(judge_c7(by_sentence, chance, rule), alternatives)
