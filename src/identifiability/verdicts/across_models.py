"""Verdicts of the claims that compare models (fine-tuned vs pre-trained; chapter 8).

C13 and C14 (amended rules, ``data/amendments.csv``) are judged from one hierarchical bootstrap of the paired
per-sentence differences d_l (fine-tuned minus pre-trained identifiability rate on the same test sentence,
layers 1..L), resampling fine-tune seeds, probe seeds and test sentences (``evidence.across_models.Paired``,
built by ``studies.across_models``). Their original rules (half-widths of two unpaired runs combined in
quadrature, ``stats.unpaired_difference``) are kept as :func:`judge_c13_original` and :func:`judge_c14_original`,
whose verdicts the claims page shows beside; the entry points :func:`c13` and :func:`c14` assemble both with the
alternatives.
"""

from __future__ import annotations

import math

from ..digits import fmt, pct
from ..evidence.across_models import FineTuning, Paired
from ..stats import Interval, sentences_for_power
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    PARTLY,
    Quantity,
    Rules,
    Verdict,
    amended,
    combine_parts,
    interval_verdict,
    with_robustness,
)
from .text import layers

C13_BAND = 0.05  # "close": the last-layer difference within 5 points of identifiability rate
C13_BAND_NARROW = 0.03  # robustness: a stricter band
C13_BAND_WIDE = 0.08  # robustness: a looser band
C13_POWER = 0.8  # an inconclusive C13 names the sentences that give this chance of "holds" at a true 0
C14_PEAK_SHARE = 0.95  # "peak late" holds when at least this share of draws peak in l > L/2
C14_PEAK_FAIL = 0.5  # ... and fails below this share
C14_PEAK_SHARE_ALT = 0.9  # robustness: the share "peak late" needs

RUN_IT = (
    "`make compare` fine-tunes the model (three seeds per task), runs the chapters on every fine-tune and the "
    "random-initialisation control, then rebuilds the book"
)
C13_QUANTITY = Quantity(
    "paired last-layer difference of identifiability rate, fine-tuned minus pre-trained (the task farthest from 0)",
    r"\bar d_L",
)
C13_TASK = Quantity("paired last-layer difference of identifiability rate, fine-tuned minus pre-trained", r"\bar d_L")
C14_GAP = Quantity(
    "change at the last layer minus change at layer 1, in absolute value (first task)",
    r"\lvert\bar d_L\rvert - \lvert\bar d_1\rvert",
)
C14_PEAK = Quantity(
    "share of bootstrap draws whose largest |d_l| lies in the upper half of the layers",
    r"\Pr[\operatorname{argmax}_l \lvert d_l\rvert > L/2]",
)
C14_PEAK_LAYER = Quantity(
    "layer with the largest |difference|", r"\operatorname{argmax}_l \lvert d_l\rvert", integer=True
)
FT_MIN_SEEDS = 3  # the amended rules bootstrap over at least this many fine-tune seeds per task


# --------------------------------------------------------------------------------------------------
# C13
# --------------------------------------------------------------------------------------------------


def _not_run(claim: str, rule: str) -> Verdict:
    why = f"this build has no fine-tuned model with results on these parameters; {RUN_IT}"
    return Verdict(claim, NOT_RUN, None, None, None, "", rule, why)


def _too_few_seeds(p: Paired, min_seeds: int) -> str | None:
    if p.ft_seeds >= min_seeds:
        return None
    return f"{p.ft_seeds} fine-tune seed(s); the rule resamples at least {min_seeds} (`make compare` fine-tunes them)"


def _power_hint(p: Paired, band: float, power: float) -> str:
    n = sentences_for_power(p.seed_var, p.sentence_var, band, power)
    if n is None:
        return (
            f"no number of test sentences would give it a chance of {power:.0%} of holding at a true difference of 0: "
            f"the seeds' variance alone ({fmt(p.seed_var)}) is too large, so more fine-tune seeds are needed"
        )
    return (
        f"about {n} test sentences instead of {p.sentences} would give it a chance of {power:.0%} of holding at a "
        "true difference of 0"
    )


def _c13_task(name: str, p: Paired, rule: str, band: float, power: float, min_seeds: int) -> Verdict:
    d = p.last
    few = _too_few_seeds(p, min_seeds)
    if few:
        v, why = INCONCLUSIVE, few
    elif not d.has_interval:
        v, why = INCONCLUSIVE, f"no interval: {d.n} test sentence(s), too few to resample"
    elif -band <= d.low and d.high <= band:
        v, why = HOLDS, f"the interval lies inside ±{band:g}"
    elif d.low > band or d.high < -band:
        v, why = FAILS, f"the interval lies outside ±{band:g}"
    else:
        v, why = INCONCLUSIVE, f"the interval straddles ±{band:g}; {_power_hint(p, band, power)}"
    return Verdict(
        f"C13.{name}", v, d.estimate, (d.low, d.high), None, "", rule, why, threshold=band, estimate_of=C13_TASK
    )


def _overall(verdicts: list[str]) -> str:
    """Every task holds -> HOLDS; any fails -> FAILS; any inconclusive -> INCONCLUSIVE; else PARTLY."""
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    if FAILS in verdicts:
        return FAILS
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else PARTLY


def judge_c13(
    tasks: dict[str, Paired],
    control: Paired | None,
    rule: str,
    *,
    band: float = C13_BAND,
    power: float = C13_POWER,
    min_seeds: int = FT_MIN_SEEDS,
) -> Verdict:
    """C13 (amended): per fine-tuned task, the 95% interval of the paired last-layer difference d_L lies
    inside ±``band``; fails if it lies outside for any task; inconclusive otherwise, naming the test
    sentences that give a ``power`` chance of holding at a true 0 (``stats.sentences_for_power``). Not run
    without fine-tuned results. ``control``: the random-initialisation model's d_L, the baseline."""
    if not tasks:
        return _not_run("C13", rule)
    parts = [_c13_task(name, p, rule, band, power, min_seeds) for name, p in tasks.items()]
    worst = max(tasks.values(), key=lambda p: abs(p.last.estimate)).last
    return Verdict(
        "C13",
        _overall([p.verdict for p in parts]),
        worst.estimate,
        (worst.low, worst.high),
        None if control is None else control.last.estimate,
        "the random-initialisation control's d_L (what changing every weight gives)"
        if control is not None
        else "no random-initialisation control has results with these parameters",
        rule,
        "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts),
        tuple(parts),
        threshold=band,
        estimate_of=C13_QUANTITY,
    )


def judge_c13_original(
    diffs: dict[str, Interval], control: Interval | None, rule: str, *, band: float = C13_BAND
) -> Verdict:
    """C13's original rule: each fine-tuned model's last-layer rate minus the pre-trained model's
    (``stats.unpaired_difference``) lies within ±``band``. ``control``: the random-initialisation model's."""
    if not diffs:
        return _not_run("C13", rule)
    parts = []
    for name, d in diffs.items():
        if not d.has_interval:
            v, why = INCONCLUSIVE, "no interval: a run has too few units to resample"
        elif -band <= d.low and d.high <= band:
            v, why = HOLDS, f"the interval lies inside ±{band:g}"
        elif d.low > band or d.high < -band:
            v, why = FAILS, f"the interval lies outside ±{band:g}"
        else:
            more = "; more test sentences or seeds narrow it"
            v, why = INCONCLUSIVE, f"the interval straddles ±{band:g}{more}"
        d_ = (d.low, d.high)
        parts.append(
            Verdict(f"C13.{name}", v, d.estimate, d_, None, "", rule, why, threshold=band, estimate_of=C13_TASK)
        )
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
        threshold=band,
        estimate_of=C13_QUANTITY,
    )


# --------------------------------------------------------------------------------------------------
# C14
# --------------------------------------------------------------------------------------------------


def _peak_hint(p: Paired, share: float, fail: float) -> str:
    """The sentences (seeds scaled alike) at which the shrunken draws' share leaves [fail, share)."""
    for m, s in p.peak_late_scaled:
        if s >= share or s < fail:
            return f"; about {m * p.sentences} test sentences (and {m}x the seeds) would settle it"
    return "; the largest change sits near the middle layer, so more units would not settle it soon"


def _changed(d: Interval) -> bool:
    """d_l measurably non-zero: its 95% interval excludes 0."""
    return d.has_interval and (d.low > 0 or d.high < 0)


def _c14_task(name: str, p: Paired, rule: str, share: float, fail: float, min_seeds: int) -> Verdict:
    L = len(p.layers)
    gap = (p.gap.low, p.gap.high)
    few = _too_few_seeds(p, min_seeds)
    if not few and not any(_changed(d) for d in p.layers):
        why = (
            "no measurable change: no layer's d_l interval excludes 0 "
            f"(d_1 {p.layers[0]}; d_{L} {p.last}), so there is no change to locate"
        )
        return Verdict(f"C14.{name}", NOT_TESTABLE, p.gap.estimate, gap, None, "", rule, why, estimate_of=C14_GAP)
    v1, why1 = interval_verdict(p.gap, 0.0, "above")
    why1 = f"|d_L| - |d_1|: {why1}"
    if v1 != FAILS and not _changed(p.last):
        moved = [i + 1 for i, d in enumerate(p.layers) if _changed(d)]
        v1 = FAILS
        where = f"({fmt(p.last.low)} to {fmt(p.last.high)})"
        changed = f"while {layers(moved)} changed" if moved else "and no layer changed measurably"
        why1 = f"d_{L}'s interval {where} contains 0 {changed}"
    if p.peak_late >= share:
        v2 = HOLDS
    elif p.peak_late < fail:
        v2 = FAILS
    else:
        v2 = INCONCLUSIVE
    why2 = f"{pct(p.peak_late)} of draws have their largest |d_l| in layers {L // 2 + 1}-{L} (holds from {share:.0%})"
    if v2 == INCONCLUSIVE:
        why2 += _peak_hint(p, share, fail)
    parts = [
        Verdict(
            f"C14.{name}.last beats first",
            v1,
            p.gap.estimate,
            gap,
            None,
            "",
            rule,
            why1,
            threshold=0.0,
            estimate_of=C14_GAP,
        ),
        Verdict(
            f"C14.{name}.peak late", v2, p.peak_late, None, None, "", rule, why2, threshold=share, estimate_of=C14_PEAK
        ),
    ]
    if few:
        v = INCONCLUSIVE
    elif v1 == HOLDS and v2 == HOLDS:
        v = HOLDS
    elif v1 == FAILS and v2 == FAILS:
        v = FAILS
    elif {v1, v2} == {HOLDS, FAILS}:
        v = PARTLY
    else:
        v = INCONCLUSIVE
    reason = (f"{few}; " if few else "") + f"last beats first: {v1} ({why1}); peak late: {v2} ({why2})"
    return Verdict(f"C14.{name}", v, p.gap.estimate, gap, None, "", rule, reason, tuple(parts), estimate_of=C14_GAP)


def judge_c14(
    tasks: dict[str, Paired],
    control: Paired | None,
    rule: str,
    *,
    peak_share: float = C14_PEAK_SHARE,
    peak_fail: float = C14_PEAK_FAIL,
    min_seeds: int = FT_MIN_SEEDS,
) -> Verdict:
    """C14 (amended, version 3), per fine-tuned task from the same draws. A task where no layer's d_l interval
    excludes 0 is not testable (no change to locate). "Last beats first": d_L's interval excludes 0 and the
    interval of |d_L| - |d_1| lies above 0 (fails below 0, or where d_L did not change while another layer
    did); "peak late": at least ``peak_share`` of draws have their largest |d_l| in l > L/2 (fails below
    ``peak_fail``). A task holds if both parts hold, fails if both fail, partly holds if one holds and the
    other fails, else is inconclusive; over the testable tasks C14 holds if every task holds, fails if one
    fails, else is inconclusive if one is, else partly holds. ``control``: the random-initialisation model's."""
    if not tasks:
        return _not_run("C14", rule)
    parts = [_c14_task(name, p, rule, peak_share, peak_fail, min_seeds) for name, p in tasks.items()]
    first = parts[0]
    testable = [p.verdict for p in parts if p.verdict != NOT_TESTABLE]
    return Verdict(
        "C14",
        _overall(testable) if testable else NOT_TESTABLE,
        first.estimate,
        first.ci95,
        None if control is None else control.gap.estimate,
        "the random-initialisation control's |d_L| - |d_1| (it changes every layer)"
        if control is not None
        else "no random-initialisation control has results with these parameters",
        rule,
        "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts),
        tuple(parts),
        estimate_of=C14_GAP,
    )


def _c14_model(name: str, layers: list[Interval], rule: str) -> Verdict:
    """C14's original rule for one fine-tuned model: ``layers`` are the per-layer differences for layers 1..L."""
    first, last = layers[0], layers[-1]
    gap_est = abs(last.estimate) - abs(first.estimate)
    half = math.hypot((last.high - last.low) / 2, (first.high - first.low) / 2)
    gap = Interval(gap_est, gap_est - half, gap_est + half, min(last.n, first.n), last.unit)
    if not gap.has_interval:
        v1, why1 = INCONCLUSIVE, "no interval of |d_L| - |d_1|: a run has too few units to resample"
    elif gap.low > 0:
        v1, why1 = HOLDS, "the interval of |d_L| - |d_1| lies above 0"
    elif gap.high < 0:
        v1, why1 = FAILS, "the interval of |d_L| - |d_1| lies below 0"
    else:
        v1, why1 = INCONCLUSIVE, "the interval of |d_L| - |d_1| contains 0; more test sentences or seeds narrow it"
    n = len(layers)
    peak = max(range(n), key=lambda i: abs(layers[i].estimate)) + 1
    v2 = HOLDS if peak > n / 2 else FAILS
    why2 = f"the largest |difference| is at layer {peak} of {n}"
    parts = (
        Verdict(
            f"C14.{name}.last beats first",
            v1,
            gap.estimate,
            (gap.low, gap.high),
            None,
            "",
            rule,
            why1,
            estimate_of=C14_GAP,
        ),
        Verdict(f"C14.{name}.peak late", v2, float(peak), None, None, "", rule, why2, estimate_of=C14_PEAK_LAYER),
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
    return Verdict(
        f"C14.{name}", v, gap.estimate, (gap.low, gap.high), None, "", rule, reason, parts, estimate_of=C14_GAP
    )


def judge_c14_original(per_model: dict[str, list[Interval]], control: list[Interval] | None, rule: str) -> Verdict:
    """C14's original rule: per fine-tuned model, |d_L| - |d_1| above 0 (half-widths in quadrature) and the
    point estimates' largest |d_l| in the upper half. ``control``: the random-initialisation model's d_l."""
    if not per_model:
        return _not_run("C14", rule)
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
        estimate_of=C14_GAP,
    )


# --------------------------------------------------------------------------------------------------
# current rule + original rule + the claims table's alternatives
# --------------------------------------------------------------------------------------------------


def c13(evidence: FineTuning, rules: Rules) -> Verdict:
    """C13 as the page records it: the amended rule's verdict with the original rule's and the alternatives
    the claims table names (band narrow, band wide, unit: sentences only, seeds fixed)."""
    ft, rule = evidence, rules.rule
    current = judge_c13(ft.tasks, ft.control, rule)
    original = judge_c13_original(ft.original_last, ft.original_control_last, rules.pre_registered)
    alternatives = {
        "band narrow": judge_c13(ft.tasks, ft.control, rule, band=C13_BAND_NARROW),
        "band wide": judge_c13(ft.tasks, ft.control, rule, band=C13_BAND_WIDE),
        "unit": judge_c13(ft.unit, ft.control_unit, rule),
    }
    return with_robustness(amended(current, original), alternatives)


def c14(evidence: FineTuning, rules: Rules) -> Verdict:
    """C14 as the page records it: the amended rule's verdict with the original rule's and the alternatives
    the claims table names (peak share 0.9, unit: sentences only, seeds fixed)."""
    ft, rule = evidence, rules.rule
    current = judge_c14(ft.tasks, ft.control, rule)
    original = judge_c14_original(ft.original_layers, ft.original_control_layers, rules.pre_registered)
    alternatives = {
        "peak share": judge_c14(ft.tasks, ft.control, rule, peak_share=C14_PEAK_SHARE_ALT),
        "unit": judge_c14(ft.unit, ft.control_unit, rule),
    }
    return with_robustness(amended(current, original), alternatives)
