"""Verdicts of the claims that compare models (fine-tuned vs pre-trained; chapter 8, from the results table)."""

from __future__ import annotations

import math

from .core import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, PARTLY, Interval, Verdict, combine_parts

C13_BAND = 0.05  # "close": within 5 points of identifiability rate


def difference(a: Interval, b: Interval) -> Interval:
    """a - b with the two 95% half-widths combined in quadrature (independent runs; conservative for runs on the
    same test sentences, whose errors correlate positively)."""
    half = math.hypot((a.high - a.low) / 2, (b.high - b.low) / 2)
    d = a.estimate - b.estimate
    return Interval(d, d - half, d + half, min(a.n, b.n))


def _none(claim: str, rule: str, why: str) -> Verdict:
    return Verdict(claim, NOT_TESTABLE, None, None, None, "", rule, why)


def judge_c13(diffs: dict[str, Interval], control: Interval | None, rule: str) -> Verdict:
    """C13: each fine-tuned model's last-layer identifiability rate minus the pre-trained model's
    (:func:`difference`) lies within ±``C13_BAND``. ``control``: the random-initialisation model's difference."""
    if not diffs:
        return _none("C13", rule, "no fine-tuned model has results with the reference's parameters (make compare)")
    parts = []
    for name, d in diffs.items():
        if not d.has_interval:
            v, why = INCONCLUSIVE, "no interval: a run has too few units to resample"
        elif -C13_BAND <= d.low and d.high <= C13_BAND:
            v, why = HOLDS, f"the interval lies inside ±{C13_BAND:g}"
        elif d.low > C13_BAND or d.high < -C13_BAND:
            v, why = FAILS, f"the interval lies outside ±{C13_BAND:g}"
        else:
            v, why = INCONCLUSIVE, f"the interval straddles ±{C13_BAND:g}"
        parts.append(Verdict(f"C13.{name}", v, d.estimate, (d.low, d.high), None, "", rule, why, threshold=C13_BAND))
    verdicts = [p.verdict for p in parts]
    overall = HOLDS if all(v == HOLDS for v in verdicts) else FAILS if FAILS in verdicts else INCONCLUSIVE
    worst = max(diffs.values(), key=lambda d: abs(d.estimate))
    return Verdict(
        "C13",
        overall,
        worst.estimate,
        (worst.low, worst.high),
        None if control is None else control.estimate,
        "the random-initialisation control's difference"
        if control is not None
        else "no random-initialisation control has results with these parameters",
        rule,
        "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts),
        tuple(parts),
        threshold=C13_BAND,
    )


def _c14_model(name: str, layers: list[Interval], rule: str) -> Verdict:
    """One fine-tuned model: ``layers`` are the per-layer differences for layers 1..L."""
    first, last = layers[0], layers[-1]
    gap_est = abs(last.estimate) - abs(first.estimate)
    half = math.hypot((last.high - last.low) / 2, (first.high - first.low) / 2)
    gap = Interval(gap_est, gap_est - half, gap_est + half, min(last.n, first.n))
    if not gap.has_interval:
        v1, why1 = INCONCLUSIVE, "no interval of |d_L| - |d_1|: a run has too few units to resample"
    elif gap.low > 0:
        v1, why1 = HOLDS, "the interval of |d_L| - |d_1| lies above 0"
    elif gap.high < 0:
        v1, why1 = FAILS, "the interval of |d_L| - |d_1| lies below 0"
    else:
        v1, why1 = INCONCLUSIVE, "the interval of |d_L| - |d_1| contains 0"
    n = len(layers)
    peak = max(range(n), key=lambda i: abs(layers[i].estimate)) + 1
    v2 = HOLDS if peak > n / 2 else FAILS
    why2 = f"the largest |difference| is at layer {peak} of {n}"
    parts = (
        Verdict(f"C14.{name}.last beats first", v1, gap.estimate, (gap.low, gap.high), None, "", rule, why1),
        Verdict(f"C14.{name}.peak late", v2, float(peak), None, None, "", rule, why2),
    )
    if v1 == HOLDS and v2 == HOLDS:
        v = HOLDS
    elif v1 == INCONCLUSIVE and v2 == FAILS:
        v = INCONCLUSIVE
    elif HOLDS in (v1, v2):
        v = PARTLY
    else:
        v = FAILS
    reason = f"last beats first: {v1} ({why1}); peak late: {v2} ({why2})"
    return Verdict(f"C14.{name}", v, gap.estimate, (gap.low, gap.high), None, "", rule, reason, parts)


def judge_c14(per_model: dict[str, list[Interval]], control: list[Interval] | None, rule: str) -> Verdict:
    """C14: fine-tuning changes the later layers most. ``per_model``: each fine-tuned model's per-layer
    differences (layers 1..L) from the pre-trained model; ``control``: the random-initialisation model's."""
    if not per_model:
        return _none("C14", rule, "no fine-tuned model has results with the reference's parameters (make compare)")
    parts = [_c14_model(name, layers, rule) for name, layers in per_model.items()]
    base = None if control is None else abs(control[-1].estimate) - abs(control[0].estimate)
    note = (
        "the random-initialisation control's |d_L| - |d_1| (it changes every layer)"
        if control is not None
        else "no random-initialisation control has results with these parameters"
    )
    combined = combine_parts("C14", parts, rule, None, base, note, first_is_core=False)
    first = parts[0]
    return Verdict(
        "C14",
        combined.verdict,
        first.estimate,
        first.ci95,
        base,
        note,
        rule,
        combined.reason,
        tuple(parts),
    )
