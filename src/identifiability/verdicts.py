"""Verdicts: one pure function per claim of ``data/claims.csv``, from typed measurements to a verdict.

Each function applies its claim's pre-registered rule (the ``rule`` column, fixed before any number was
looked at; the thresholds are the named constants beside each function) to an estimate, its 95% interval
and a null baseline, and returns a :class:`Verdict`. Nothing here is written by hand per run: the
chapters record measurements, these functions decide, and :func:`render` turns the decision into the
sentence the page shows. Five outcomes:

- *holds* and *fails*: the interval lies on one side of the rule's threshold;
- *partly holds*: one part of a compound claim holds and another does not (the reason says which);
- *inconclusive*: an interval contains its threshold (the reason says how many units would settle it);
- *not testable on this model*: the model cannot show the effect (the reason says why, from a measurement).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .stats import units_to_settle

HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE = (
    "holds",
    "partly holds",
    "fails",
    "inconclusive",
    "not testable on this model",
)
VERDICTS = (HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE)


@dataclass(frozen=True)
class Interval:
    """A measured quantity: its estimate, 95% interval and the number of independent units behind it."""

    estimate: float
    low: float
    high: float
    n: int = 0  # units (sentences, inputs) the interval resamples; 0 when exact

    @classmethod
    def exact(cls, value: float) -> Interval:
        return cls(value, value, value, 0)

    def side(self, threshold: float) -> str:
        """'above', 'below' or 'contains' for ``threshold``."""
        if self.low > threshold:
            return "above"
        if self.high < threshold:
            return "below"
        return "contains"


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict with everything that decided it."""

    claim: str
    verdict: str
    estimate: float | None
    ci95: tuple[float, float] | None
    baseline: float | None
    baseline_note: str
    rule: str
    reason: str
    parts: tuple[Verdict, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def to_json(self) -> dict:
        d = asdict(self)
        d["parts"] = [p.to_json() for p in self.parts]
        return d


def _interval_verdict(x: Interval, threshold: float, holds_if: str) -> tuple[str, str]:
    """HOLDS when the interval lies on the ``holds_if`` side ('above'/'below') of ``threshold``, FAILS on the
    other side, INCONCLUSIVE when it contains it (with the number of units that would settle it)."""
    side = x.side(threshold)
    if side == holds_if:
        return HOLDS, f"the interval lies {side} {threshold:g}"
    if side != "contains":
        return FAILS, f"the interval lies {side} {threshold:g}"
    more = units_to_settle(x.n, (x.low, x.high), x.estimate, threshold) if x.n else None
    if more:
        hint = f"; about {more} units instead of {x.n} would settle it"
    elif x.n:
        hint = "; the estimate sits on it, so more units would not settle it"
    else:
        hint = ""
    return INCONCLUSIVE, f"the interval contains {threshold:g}{hint}"


def _part(claim: str, name: str, x: Interval | None, verdict: str, reason: str, rule: str) -> Verdict:
    return Verdict(
        f"{claim}.{name}",
        verdict,
        None if x is None else x.estimate,
        None if x is None else (x.low, x.high),
        None,
        "",
        rule,
        reason,
    )


def _combine(
    claim: str,
    parts: list[Verdict],
    rule: str,
    estimate: Interval | None,
    baseline: float | None,
    baseline_note: str,
    first_is_core: bool = True,
) -> Verdict:
    """Compound claims, part by part: all parts hold -> HOLDS; the core (first) part fails, or with no core
    every part fails -> FAILS; else any part inconclusive -> INCONCLUSIVE; else PARTLY. The reason names
    each part's verdict."""
    verdicts = [p.verdict for p in parts]
    if all(v == HOLDS for v in verdicts):
        v = HOLDS
    elif (verdicts[0] == FAILS) if first_is_core else all(x == FAILS for x in verdicts):
        v = FAILS
    elif INCONCLUSIVE in verdicts:
        v = INCONCLUSIVE
    else:
        v = PARTLY
    reason = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts)
    return Verdict(
        claim,
        v,
        None if estimate is None else estimate.estimate,
        None if estimate is None else (estimate.low, estimate.high),
        baseline,
        baseline_note,
        rule,
        reason,
        tuple(parts),
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
    note = "the real A must pass the exact test (it is a softmax of rank d_q by construction)"
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
        p1 = _part("C4", "decorrelation", median_longest, FAILS, "A_eff differs from A for some d_s <= d_v", rule)
    else:
        v, why = _interval_verdict(median_longest, C4_PEARSON, "below")
        p1 = _part("C4", "decorrelation", median_longest, v, why, rule)
    v, why = _interval_verdict(paired_vs_random, 0.0, "below")
    p2 = _part("C4", "beyond dimension counting", paired_vs_random, v, why, rule)
    return _combine(
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
    v1, why1 = _interval_verdict(sep_ratio, C5_RATIO, "below")
    v2, why2 = (
        _interval_verdict(sep_vs_random, 0.0, "below")
        if sep_vs_random is not None
        else (INCONCLUSIVE, "no random-subspace baseline was measured")
    )
    parts = [
        _part("C5", "[SEP] mostly null", sep_ratio, v1, why1, rule),
        _part("C5", "beyond a random subspace", sep_vs_random, v2, why2, rule),
    ]
    combined = _combine("C5", parts, rule, sep_ratio, random_ratio, note)
    if combined.verdict in (FAILS, INCONCLUSIVE) and peak_ratio is not None and peak_vs_random is not None:
        pv, pwhy = _interval_verdict(peak_ratio, C5_RATIO, "below")
        pr, prwhy = _interval_verdict(peak_vs_random, 0.0, "below")
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


# --------------------------------------------------------------------------------------------------
# C6-C8: token identity (chapters 4, 5)
# --------------------------------------------------------------------------------------------------

C6_HOLDS, C6_PARTLY = 0.85, 0.70  # last-layer rate: the paper's 93% (12 layers), 8 points of tolerance


def judge_c6(last_rate: Interval, shuffled_rate: float, rule: str) -> Verdict:
    """C6: tokens stay identifiable at the last layer (linear map, cosine lookup)."""
    note = "the same probe trained on shuffled labels"
    base = dict(
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
    _, why = _interval_verdict(last_rate, edge, "above")
    return Verdict(verdict=INCONCLUSIVE, reason=why, **base)


def judge_c7(last_minus_first: Interval, chance: float, rule: str) -> Verdict:
    """C7: without a learned map identifiability decays from the first encoder layer to the last."""
    v, why = _interval_verdict(last_minus_first, 0.0, "below")
    return Verdict(
        "C7",
        v,
        last_minus_first.estimate,
        (last_minus_first.low, last_minus_first.high),
        chance,
        "chance: one over the tokens of a sentence",
        rule,
        why,
    )


C8_ANGLE_SLACK = 0.02  # unit-normalised probes may lose this much against raw probes
C8_NORM_CHANCE = 0.05  # norm-only probes must stay within this of chance
C8_MIN_SPREAD = 0.05  # relative norm spread (IQR / median) below which the magnitude part is not testable


def judge_c8(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
) -> Verdict:
    """C8: identity lives in the angle, not the magnitude."""
    va, whya = _interval_verdict(unit_minus_raw, -C8_ANGLE_SLACK, "above")
    vn, whyn = _interval_verdict(norm_only_minus_chance, C8_NORM_CHANCE, "below")
    angle = HOLDS if (va, vn) == (HOLDS, HOLDS) else FAILS if FAILS in (va, vn) else INCONCLUSIVE
    parts = [_part("C8", "angle", unit_minus_raw, angle, f"direction only: {whya}; norm only: {whyn}", rule)]
    if norm_spread < C8_MIN_SPREAD or norm_adds is None:
        parts.append(
            _part(
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
                "chance for the norm-only probe",
                rule,
                parts[0].reason + "; magnitude: not testable",
                tuple(parts),
            )
        return _combine("C8", parts[:1], rule, unit_minus_raw, None, "chance for the norm-only probe")
    # the claim is that the norm adds little: holds when the norm's contribution stays below the slack
    vm, whym = _interval_verdict(norm_adds, C8_ANGLE_SLACK, "below")
    parts.append(_part("C8", "magnitude", norm_adds, vm, whym, rule))
    return _combine("C8", parts, rule, unit_minus_raw, None, "chance for the norm-only probe")


# --------------------------------------------------------------------------------------------------
# C9-C11: context mixing (chapter 6)
# --------------------------------------------------------------------------------------------------


def judge_c9(step_diffs: list[Interval], last_minus_first: Interval, uniform: float, rule: str) -> Verdict:
    """C9: the own token's share falls monotonically with depth. ``step_diffs``: layer l+1 minus layer l."""
    steps = [_interval_verdict(s, 0.0, "below")[0] for s in step_diffs]
    mono = FAILS if FAILS in steps else INCONCLUSIVE if INCONCLUSIVE in steps else HOLDS
    rising = [i + 2 for i, v in enumerate(steps) if v == FAILS]
    unclear = [i + 2 for i, v in enumerate(steps) if v == INCONCLUSIVE]
    why = (
        "every step falls"
        if mono == HOLDS
        else f"rises at layer(s) {rising}"
        if rising
        else f"steps to layer(s) {unclear} are within noise"
    )
    p1 = _part("C9", "monotone", None, mono, why, rule)
    v2, why2 = _interval_verdict(last_minus_first, 0.0, "below")
    p2 = _part("C9", "decreasing", last_minus_first, v2, why2, rule)
    # the paper's core statement is the decrease; monotonicity is the stronger part
    return _combine("C9", [p2, p1], rule, last_minus_first, uniform, "uniform mixing, 1/d_s")


C10_LOW, C10_HIGH = 0.55, 0.85  # own token on top at the last layer: the paper's ~70%, 15 points of tolerance


def judge_c10(top_is_self_last: Interval, chance: float, rule: str) -> Verdict:
    """C10: the own token is usually the largest contributor, about 30% lose that in the last layers."""
    base = dict(
        claim="C10",
        estimate=top_is_self_last.estimate,
        ci95=(top_is_self_last.low, top_is_self_last.high),
        baseline=chance,
        baseline_note="1/d_s: the own token on top by chance",
        rule=rule,
    )
    x = top_is_self_last
    if C10_LOW <= x.low and x.high <= C10_HIGH:
        return Verdict(verdict=HOLDS, reason=f"the interval lies in [{C10_LOW:g}, {C10_HIGH:g}]", **base)
    if x.high < C10_LOW or x.low > C10_HIGH:
        return Verdict(verdict=FAILS, reason=f"the interval lies outside [{C10_LOW:g}, {C10_HIGH:g}]", **base)
    edge = C10_LOW if x.low < C10_LOW else C10_HIGH
    _, why = _interval_verdict(x, edge, "above" if edge == C10_LOW else "below")
    return Verdict(verdict=INCONCLUSIVE, reason=why, **base)


def judge_c11(
    near_minus_far: list[Interval], far_last_minus_first: Interval, position_only: float, rule: str
) -> Verdict:
    """C11: context is mostly local, and long-range contributions grow in later layers."""
    local = [_interval_verdict(x, 0.0, "above")[0] for x in near_minus_far]
    lv = FAILS if FAILS in local else INCONCLUSIVE if INCONCLUSIVE in local else HOLDS
    p1 = _part(
        "C11",
        "local",
        None,
        lv,
        "near neighbours outweigh far tokens in every layer" if lv == HOLDS else "not in every layer",
        rule,
    )
    v2, why2 = _interval_verdict(far_last_minus_first, 0.0, "above")
    p2 = _part("C11", "long range grows", far_last_minus_first, v2, why2, rule)
    return _combine(
        "C11",
        [p1, p2],
        rule,
        far_last_minus_first,
        position_only,
        "position-only model: the shares under uniform mixing over the positions present",
        first_is_core=False,
    )


# --------------------------------------------------------------------------------------------------
# prose
# --------------------------------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.3g}"


def render(v: Verdict, claim_text: str = "") -> str:
    """The sentence a page shows for a verdict (Markdown): claim, verdict, estimate with interval, baseline, reason."""
    est = _num(v.estimate)
    if v.ci95 is not None and v.ci95[0] != v.ci95[1]:
        est += f" (95% interval {_num(v.ci95[0])} to {_num(v.ci95[1])})"
    base = (
        f"; baseline {_num(v.baseline)} ({v.baseline_note})"
        if v.baseline is not None
        else (f"; baseline: {v.baseline_note}" if v.baseline_note else "")
    )
    head = f"**{v.claim} — {v.verdict}.**" + (f" {claim_text}." if claim_text else "")
    return f"{head} Estimate {est}{base}. Why: {v.reason}."
