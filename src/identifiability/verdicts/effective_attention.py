"""Claims about effective attention (chapter 3): C4, C5 and C18.

C4 and C5 were amended (``data/amendments.csv``): C4 is judged over the whole measured curve, C5 on summed
masses on a separator where raw attention has a peak. C18 (post hoc, never amended) judges this model's
attention sink, whichever special token carries it, by the rule C5 applies to a peaked separator. Each judge
takes its thresholds as keyword arguments, so the robustness alternatives of ``data/claims.csv`` call the same
function with moved thresholds, another null or intervals over another unit; the entry points :func:`c4`,
:func:`c5` and :func:`c18` assemble the rule in force, its alternatives and (C4, C5) the original rule's
verdict from the evidence (:mod:`identifiability.evidence.effective_attention`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..base.digits import fmt
from ..base.stats import Interval
from ..evidence.effective_attention import C4Evidence, C5Category, C5Evidence, C18Evidence, sink_of
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    PARTLY,
    Quantity,
    Rules,
    Verdict,
    amended,
    combine_parts,
    interval_verdict,
    part_verdict,
    with_robustness,
)

# --------------------------------------------------------------------------------------------------
# C4: raw and effective attention diverge as d_s grows beyond d_v
# --------------------------------------------------------------------------------------------------

C4_PEARSON = 0.9  # the original rule: median Pearson(A, A_eff) at the longest length must lie below this
C4_SHIFT = 0.05  # robustness 'threshold': both parts' thresholds moved this far towards the claim
C4_TREND = Quantity(
    "Spearman rank correlation of input length d_s with the input's median Pearson(A, A_eff) over heads, "
    "inputs with d_s > d_v",
    r"\rho_S\big(d_s,\ \mathrm{med}_h\, r(A, A_{\mathrm{eff}})\big)",
)
C4_BEYOND = Quantity(
    "mean over inputs with d_s >= d_v + 2 of the median over heads of Pearson(A, A_eff) minus Pearson(A, A "
    "projected onto {null})",
    r"\overline{r(A, A_{\mathrm{eff}}) - r(A, A_{\mathrm{null}})}",
)
C4_MEDIAN = Quantity(
    "median over heads and inputs of Pearson(A, A_eff) at the longest input length",
    r"\mathrm{med}\, r(A, A_{\mathrm{eff}})",
)
C4_PAIRED = Quantity(
    "mean paired difference at the longest length, Pearson(A, A_eff) minus Pearson(A, A projected onto a random "
    "subspace of the same rank)",
    r"\overline{r(A, A_{\mathrm{eff}}) - r(A, A_{\mathrm{rand}})}",
)


def _with_numbers(why: str, x: Interval) -> str:
    return f"{x}; {why}"


def judge_c4(
    identical_at_or_below_dv: bool,
    min_at_or_below_dv: float | None,
    diverges: bool,
    trend: Interval,
    beyond: Interval,
    random_trend: float | None,
    rule: str,
    *,
    trend_below: float = 0.0,
    beyond_below: float = 0.0,
    null: str = "a random subspace of the same rank",
) -> Verdict:
    """C4, amended rule. Decrease: A_eff = A for every head with an empty LN(T) at d_s <= d_v, and the rank
    correlation of d_s with the median Pearson(A, A_eff) has its interval below ``trend_below``. Beyond
    dimension counting: the mean paired difference from ``null`` has its interval below ``beyond_below``.
    Where A_eff = A at every length there is nothing that decreases: the first part fails (its rank
    correlation is undefined)."""
    if not identical_at_or_below_dv:
        why = (
            f"A_eff differs from A for some head with an empty LN(T) at d_s <= d_v (smallest Pearson "
            f"{fmt(min_at_or_below_dv)})"
        )
        p1 = part_verdict("C4", "decrease", trend, FAILS, why, rule, estimate_of=C4_TREND)
    elif not diverges:
        why = "A_eff = A at every length: nothing decorrelates"
        p1 = part_verdict("C4", "decrease", trend, FAILS, why, rule, estimate_of=C4_TREND)
    else:
        v, why = interval_verdict(trend, trend_below, "below")
        p1 = part_verdict("C4", "decrease", trend, v, _with_numbers(why, trend), rule, trend_below, C4_TREND)
    v, why = interval_verdict(beyond, beyond_below, "below")
    p2 = part_verdict(
        "C4",
        "beyond dimension counting",
        beyond,
        v,
        _with_numbers(f"against {null}: {why}", beyond),
        rule,
        beyond_below,
        replace(C4_BEYOND, words=C4_BEYOND.words.format(null=null)),
    )
    v = combine_parts(
        "C4", [p1, p2], rule, trend, random_trend, "the same rank correlation for a random subspace of the same rank"
    )
    return replace(v, estimate_of=C4_TREND)


def judge_c4_original(
    identical_below_dv: bool, median_longest: Interval, paired_longest: Interval, random_median: float, rule: str
) -> Verdict:
    """C4, original rule: A_eff = A below d_v (as its first code tested: d_s < d_v), the median Pearson at
    the longest length below ``C4_PEARSON``, and the paired difference from a random subspace there below 0."""
    if not identical_below_dv:
        why = "A_eff differs from A for some d_s <= d_v"
        p1 = part_verdict("C4", "decorrelation", median_longest, FAILS, why, rule, estimate_of=C4_MEDIAN)
    else:
        v, why = interval_verdict(median_longest, C4_PEARSON, "below")
        p1 = part_verdict("C4", "decorrelation", median_longest, v, why, rule, C4_PEARSON, C4_MEDIAN)
    v, why = interval_verdict(paired_longest, 0.0, "below")
    p2 = part_verdict("C4", "beyond dimension counting", paired_longest, v, why, rule, 0.0, C4_PAIRED)
    v = combine_parts(
        "C4",
        [p1, p2],
        rule,
        median_longest,
        random_median,
        "median Pearson(A, A projected onto a random subspace of the same rank)",
    )
    return replace(v, estimate_of=C4_MEDIAN)


def c4(evidence: C4Evidence, rules: Rules) -> Verdict:
    """C4 under the rule in force, with its robustness alternatives (``threshold``, ``null``, ``unit``) and
    the original rule's verdict."""
    e, rule = evidence, rules.rule
    common = (e.identical_at_or_below_dv, e.min_at_or_below_dv, e.diverges)
    v = judge_c4(*common, e.trend, e.beyond, e.random_trend, rule)
    alternatives = {
        "threshold": judge_c4(
            *common, e.trend, e.beyond, e.random_trend, rule, trend_below=-C4_SHIFT, beyond_below=-C4_SHIFT
        ),
        "null": judge_c4(*common, e.trend, e.beyond_random_weights, e.random_trend, rule, null="random value weights"),
        "unit": judge_c4(*common, e.trend_by_heads, e.beyond_by_heads, e.random_trend, rule),
    }
    original = judge_c4_original(
        e.identical_below_dv, e.median_longest, e.paired_longest, e.random_median_longest, rules.pre_registered
    )
    return amended(with_robustness(v, alternatives), original)


# --------------------------------------------------------------------------------------------------
# C5: the attention peak on [SEP] lies largely in the null space
# --------------------------------------------------------------------------------------------------

C5_RATIO = 0.5  # effective / raw summed mass of a peaked separator must lie below this
C5_PEAK = 3.0  # a peak: mean raw mass per query row at least this many times the uniform share
C5_PEAK_LOW = 2.0  # robustness 'peak 2x'
C5_PEAK_HIGH = 5.0  # robustness 'peak 5x'
C5_RATIO_SHIFT = 0.1  # robustness 'threshold': the ratio threshold moved this far towards the claim
C5_RATIO_Q = Quantity(
    "effective over raw attention mass on {token}, each summed over heads, layers and query rows",
    r"m_{\mathrm{eff}} / m_{\mathrm{raw}}",
)
C5_VS_RANDOM_Q = Quantity(
    "that ratio minus the ratio of a random subspace of the same rank, per input",
    r"m_{\mathrm{eff}} / m_{\mathrm{raw}} - m_{\mathrm{rand}} / m_{\mathrm{raw}}",
)
C5_ORIGINAL_Q = Quantity(
    "effective (rows normalised to sum to one) over raw attention mass on [SEP]", r"m_{\mathrm{eff}} / m_{\mathrm{raw}}"
)


def _ratio_quantity(token: str, q: Quantity = C5_RATIO_Q) -> Quantity:
    return replace(q, words=q.words.format(token=token))


def _peaks(categories: Sequence[C5Category]) -> str:
    """'end separator ([SEP]) gets 0.700× the uniform share on sentences; ...': each category's peak."""
    return "; ".join(f"{c.label} gets {fmt(c.peak)}× the uniform share on {c.inputs}" for c in categories)


def _judge_category(
    claim: str, c: C5Category, ratio: float, by_heads: bool, rule: str, ratio_q: Quantity
) -> tuple[str, str, list[Verdict], Interval]:
    """One peaked category under C5's (version 4) and C18's shared rule: holds if its ratio interval lies below
    ``ratio`` and the paired interval of its ratio minus the random subspace's below 0; fails if the ratio
    interval lies above ``ratio``; inconclusive if it contains ``ratio``, or lies below it while the paired
    interval contains 0 (or either has no interval); partly holds (no more than a random subspace) if the ratio
    interval lies below ``ratio`` and the paired interval above 0."""
    r, d = (c.ratio_by_heads, c.vs_random_by_heads) if by_heads else (c.ratio, c.vs_random)
    v1, why1 = interval_verdict(r, ratio, "below")
    v2, why2 = interval_verdict(d, 0.0, "below")
    parts = [
        part_verdict(claim, f"{c.label} mostly null", r, v1, _with_numbers(why1, r), rule, ratio, ratio_q),
        part_verdict(
            claim, f"{c.label} beyond a random subspace", d, v2, _with_numbers(why2, d), rule, 0.0, C5_VS_RANDOM_Q
        ),
    ]
    if v1 == HOLDS and v2 == HOLDS:
        v = HOLDS
    elif v1 == FAILS:
        v = FAILS
    elif INCONCLUSIVE in (v1, v2):
        v = INCONCLUSIVE
    else:  # v1 holds, v2 fails: mostly removed, but no more than a random subspace of the same rank removes
        v = PARTLY
    reason = (
        f"{c.label}, {fmt(c.peak)}× the uniform share on {c.inputs}: mostly null {v1} ({_with_numbers(why1, r)}), "
        f"beyond a random subspace {v2} ({_with_numbers(why2, d)})"
    )
    return v, reason, parts, r


def judge_c5(
    categories: Sequence[C5Category],
    rule: str,
    *,
    ratio: float = C5_RATIO,
    peak: float = C5_PEAK,
    by_heads: bool = False,
) -> Verdict:
    """C5, version 4: judged on the separators alone (the end separator; on pairs also the middle one). A
    separator with a peak (at least ``peak`` times its uniform share) is judged by :func:`_judge_category`;
    with two, C5 takes the first of holds, fails, inconclusive, partly holds that one of them reaches. With no
    peaked separator C5 is not testable, and the reason names each separator's peak. The start token (and
    this model's sink, whichever it is) is C18's, never C5's."""
    note = "the same ratio for projection onto a random subspace of the same rank"
    separators = [c for c in categories if c.separator]
    peaked = [c for c in separators if c.peak >= peak]
    if not peaked:
        peaks = _peaks(separators) or "this tokenizer adds no separator token"
        why = f"no separator has a peak of {peak:g}× the uniform share: {peaks}"
        return Verdict("C5", NOT_TESTABLE, None, None, None, note, rule, why)
    results = [(c, *_judge_category("C5", c, ratio, by_heads, rule, _ratio_quantity(c.label))) for c in peaked]
    c, v, why, parts, r = next(res for state in (HOLDS, FAILS, INCONCLUSIVE, PARTLY) for res in results
                               if res[1] == state)  # fmt: skip
    others = [p for res in results if res[0] is not c for p in res[3]]
    return Verdict(
        "C5",
        v,
        r.estimate,
        (r.low, r.high),
        c.random,
        note,
        rule,
        why,
        (*parts, *others),
        ratio,
        "no more than a random subspace" if v == PARTLY else "",
        estimate_of=_ratio_quantity(c.label),
    )


def judge_c5_original(
    sep_ratio: Interval | None,
    sep_vs_random: Interval | None,
    peak_token: str,
    peak_ratio: Interval | None,
    peak_vs_random: Interval | None,
    random_ratio: float | None,
    rule: str,
) -> Verdict:
    """C5, original rule: the [SEP] peak lies largely in the null space. ``*_ratio``: effective (rows
    normalised) / raw mass; ``*_vs_random``: that ratio minus the random-subspace one, per sentence.
    ``peak_*``: this model's largest special-token peak when it is another token than the separator."""
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
        part_verdict("C5", "[SEP] mostly null", sep_ratio, v1, why1, rule, C5_RATIO, C5_ORIGINAL_Q),
        part_verdict("C5", "beyond a random subspace", sep_vs_random, v2, why2, rule, 0.0, C5_VS_RANDOM_Q),
    ]
    combined = replace(combine_parts("C5", parts, rule, sep_ratio, random_ratio, note), estimate_of=C5_ORIGINAL_Q)
    if combined.verdict in (FAILS, INCONCLUSIVE) and peak_ratio is not None and peak_vs_random is not None:
        pv, pwhy = interval_verdict(peak_ratio, C5_RATIO, "below")
        pr, _ = interval_verdict(peak_vs_random, 0.0, "below")
        if pv == HOLDS and pr == HOLDS:
            return replace(
                combined,
                verdict=PARTLY,
                reason=f"not for [SEP] ({combined.reason}), but for this model's largest peak, {peak_token} "
                f"({pwhy}, and below the random subspace's)",
            )
    return combined


def c5(evidence: C5Evidence, rules: Rules) -> Verdict:
    """C5 under the rule in force, with its robustness alternatives (``peak 2x``, ``peak 5x``,
    ``threshold``, ``unit``) and the original rule's verdict."""
    categories, rule = evidence.categories, rules.rule
    v = judge_c5(categories, rule)
    alternatives = {
        "peak 2x": judge_c5(categories, rule, peak=C5_PEAK_LOW),
        "peak 5x": judge_c5(categories, rule, peak=C5_PEAK_HIGH),
        "threshold": judge_c5(categories, rule, ratio=C5_RATIO - C5_RATIO_SHIFT),
        "unit": judge_c5(categories, rule, by_heads=True),
    }
    o = evidence.original
    first = judge_c5_original(
        o.separator_ratio, o.separator_vs_random, o.peak_token, o.peak_ratio, o.peak_vs_random, o.random_ratio,
        rules.pre_registered,
    )  # fmt: skip
    return amended(with_robustness(v, alternatives), first)


# --------------------------------------------------------------------------------------------------
# C18 (post hoc): this model's attention sink lies largely in the null space
# --------------------------------------------------------------------------------------------------

C18_RATIO = 0.5  # effective / raw summed mass of the sink must lie below this
C18_PEAK = 3.0  # a sink: the largest special-token peak at least this many times its uniform share
C18_PEAK_LOW = 2.0  # robustness 'peak 2x'
C18_PEAK_HIGH = 5.0  # robustness 'peak 5x'
C18_RATIO_Q = Quantity(
    "effective over raw attention mass on this model's sink, {token}, each summed over heads, layers and query rows",
    r"m_{\mathrm{eff}} / m_{\mathrm{raw}}",
)


def judge_c18(
    categories: Sequence[C5Category],
    rule: str,
    *,
    ratio: float = C18_RATIO,
    peak: float = C18_PEAK,
    by_heads: bool = False,
) -> Verdict:
    """C18: the sink (the special-token category with the largest raw peak, :func:`sink_of`) is a sink only
    if its peak is at least ``peak`` times its uniform share, else C18 is not testable and the reason names
    every category's peak. The sink is judged by the rule C5 applies to a peaked separator
    (:func:`_judge_category`); its baseline is the random subspace's ratio (the same quantity, under the null)."""
    note = "the same ratio for projection onto a random subspace of the same rank"
    sink = sink_of(categories)
    if sink is None or sink.peak < peak:
        peaks = _peaks(categories) or "this tokenizer adds no start or separator token"
        why = f"no special token has a peak of {peak:g}× the uniform share, so this model has no sink: {peaks}"
        return Verdict("C18", NOT_TESTABLE, None, None, None, note, rule, why)
    q = _ratio_quantity(sink.label, C18_RATIO_Q)
    v, why, parts, r = _judge_category("C18", sink, ratio, by_heads, rule, q)
    return Verdict(
        "C18",
        v,
        r.estimate,
        (r.low, r.high),
        sink.random,
        note,
        rule,
        f"this model's sink is {why}",
        tuple(parts),
        ratio,
        "no more than a random subspace" if v == PARTLY else "",
        estimate_of=q,
    )


def c18(evidence: C18Evidence, rules: Rules) -> Verdict:
    """C18 under its rule, with its robustness alternatives (``peak 2x``, ``peak 5x``, ``unit``). Never
    amended: no original rule's verdict."""
    categories, rule = evidence.categories, rules.rule
    v = judge_c18(categories, rule)
    alternatives = {
        "peak 2x": judge_c18(categories, rule, peak=C18_PEAK_LOW),
        "peak 5x": judge_c18(categories, rule, peak=C18_PEAK_HIGH),
        "unit": judge_c18(categories, rule, by_heads=True),
    }
    return with_robustness(v, alternatives)
