"""Verdicts of the claims that compare models (fine-tuned vs pre-trained; chapter 9).

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

from ..base.digits import fmt, pct
from ..base.stats import Interval, power_to_detect, sentences_for_power
from ..evidence.across_models import FineTuning, Paired
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
    "change at the last layer off the ceiling minus change at the first, in absolute value (first task)",
    r"\lvert\bar d_m\rvert - \lvert\bar d_f\rvert",
)
C14_GAP_ORIGINAL = Quantity(
    "change at the last layer minus change at layer 1, in absolute value (first model)",
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
NO_CHANGE = "no change detected"  # the qualifier of a null result that the page gives with its power


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


def _share(power: float) -> str:
    """A power as a percentage, 'over 99.9%' where three significant digits would round it up to 100%."""
    return "over 99.9%" if power > 0.9995 and power < 1 else pct(power)


def _ceiling_reason(p: Paired, band: float) -> str:
    power = p.ceiling_power(band)
    tokens = sum(p.tokens)
    if power != power:  # NaN: the runs recorded no test tokens and none could be read from the rates
        return (
            f"{NO_CHANGE}: both models identify every test token at the last layer; the runs record no test "
            "tokens, so the power is unknown"
        )
    least = "" if p.tokens_recorded else "at least "
    return (
        f"{NO_CHANGE}: both models identify every test token at the last layer (d_L = 0 in every resample); "
        f"the test had a power of {_share(power)} to detect a change of {band:g} (a rate of {1 - band:g} on the "
        f"same {least}{tokens} test tokens in {p.sentences} test sentences)"
    )


def _c13_task(name: str, p: Paired, rule: str, band: float, power: float, min_seeds: int) -> Verdict:
    d = p.last
    few = _too_few_seeds(p, min_seeds)
    qualifier = ""
    if few:
        v, why = INCONCLUSIVE, few
    elif p.at_ceiling:
        v, why, qualifier = HOLDS, _ceiling_reason(p, band), NO_CHANGE
    elif not d.has_interval:
        v, why = INCONCLUSIVE, f"no interval: {d.n} test sentence(s), too few to resample"
    elif -band <= d.low and d.high <= band:
        v, why = HOLDS, f"the interval lies inside ±{band:g}"
    elif d.low > band or d.high < -band:
        v, why = FAILS, f"the interval lies outside ±{band:g}"
    else:
        v, why = INCONCLUSIVE, f"the interval straddles ±{band:g}; {_power_hint(p, band, power)}"
    return Verdict(
        f"C13.{name}",
        v,
        d.estimate,
        (d.low, d.high),
        None,
        "",
        rule,
        why,
        threshold=band,
        qualifier=qualifier,
        estimate_of=C13_TASK,
    )


def _qualifier(parts: list[Verdict], verdict: str) -> str:
    """The overall qualifier: "no change detected" where every task that decided ``verdict`` has it (in
    which tasks, when not all of them)."""
    same = [p for p in parts if p.verdict == verdict]
    marked = [p.claim.split(".", 1)[1] for p in same if p.qualifier == NO_CHANGE]
    if not marked:
        return ""
    return NO_CHANGE if len(marked) == len(parts) else f"{NO_CHANGE} in {', '.join(marked)}"


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
    """C13 (amended, version 3): per fine-tuned task, the 95% interval of the paired last-layer difference
    d_L lies inside ±``band``; fails if it lies outside for any task; inconclusive otherwise, naming the test
    sentences that give a ``power`` chance of holding at a true 0 (``stats.sentences_for_power``). A task
    with fewer than ``min_seeds`` fine-tune seeds is inconclusive. A task whose two models identify every
    test token at the last layer (d_L = 0 and the reference's rate 1 in every draw) holds qualified "no
    change detected", its reason giving the power to detect a change of ``band`` (``Paired.ceiling_power``).
    Not run without fine-tuned results. ``control``: the random-initialisation model's d_L, the baseline."""
    if not tasks:
        return _not_run("C13", rule)
    parts = [_c13_task(name, p, rule, band, power, min_seeds) for name, p in tasks.items()]
    worst = max(tasks.values(), key=lambda p: abs(p.last.estimate)).last
    overall = _overall([p.verdict for p in parts])
    return Verdict(
        "C13",
        overall,
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
        qualifier=_qualifier(parts, overall) if overall == HOLDS else "",
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


def _off_ceiling(p: Paired, band: float) -> tuple[int, ...]:
    """The layers whose reference rate's upper bound lies below 1 - ``band``; checked against the layers the
    study read the gap and the peak on (it was given the band to build them)."""
    off = tuple(k for k, r in enumerate(p.reference, start=1) if r.has_interval and r.high < 1 - band)
    if off != p.off_ceiling:
        raise ValueError(f"the evidence's off-ceiling layers {p.off_ceiling} are not the rule's {off}: another band")
    return off


def _rates(p: Paired, which: list[int]) -> str:
    """'1 (100.00%), 2 (99.96%)': the reference's rate at these layers (two decimals: near the ceiling three
    significant digits would round 99.96% to 100%)."""
    return ", ".join(f"{k} ({100 * p.reference[k - 1].estimate:.2f}%)" for k in which)


def _untestable(p: Paired, off: tuple[int, ...], rule: str) -> Verdict | None:
    """C14 not testable on this model: fewer than two layers off the ceiling, or none in the lower half."""
    L = len(p.layers)
    if len(off) >= 2 and any(k <= L / 2 for k in off):
        return None
    at = [k for k in range(1, L + 1) if k not in off]
    bound = f"the upper bound of the reference's rate is at least {p.ceiling:g}"
    where = f"off the ceiling: {layers(off)}" if off else "no layer is off the ceiling"
    low = f"no layer off the ceiling lies in the lower half, 1-{L // 2}"
    short = "fewer than two layers are off the ceiling" if len(off) < 2 else low
    why = f"{short} ({where}); at the ceiling ({bound}): layer(s) {_rates(p, at)}".replace(
        "layer(s)", "layer" if len(at) == 1 else "layers"
    )
    return Verdict("C14", NOT_TESTABLE, None, None, None, "", rule, why, estimate_of=C14_GAP)


def _no_change(p: Paired, off: tuple[int, ...], band: float) -> str:
    """The null result's reason, with the power to detect a change of ``band`` at each off-ceiling layer."""
    power = ", ".join(f"layer {k} {_share(power_to_detect(band, p.layer_var[k - 1]))}" for k in off)
    return (
        f"{NO_CHANGE}: no off-ceiling layer's d_l interval excludes 0 ({layers(off)}); the power to detect a "
        f"change of {band:g}: {power}"
    )


def _c14_task(
    name: str, p: Paired, off: tuple[int, ...], rule: str, share: float, fail: float, min_seeds: int, band: float
) -> Verdict:
    L, f, m = len(p.layers), off[0], off[-1]
    gap = (p.gap.low, p.gap.high)
    few = _too_few_seeds(p, min_seeds)
    if not few and not any(_changed(p.layers[k - 1]) for k in off):
        why = _no_change(p, off, band)
        est, v = p.gap.estimate, INCONCLUSIVE
        return Verdict(f"C14.{name}", v, est, gap, None, "", rule, why, qualifier=NO_CHANGE, estimate_of=C14_GAP)
    v1, why1 = interval_verdict(p.gap, 0.0, "above")
    why1 = f"|d_{m}| - |d_{f}|: {why1}"
    d_m = p.layers[m - 1]
    if v1 != FAILS and not _changed(d_m):
        moved = [k for k in off if _changed(p.layers[k - 1])]
        where = f"({fmt(d_m.low)} to {fmt(d_m.high)})"
        if moved:
            v1, why1 = FAILS, f"d_{m}'s interval {where} contains 0 while {layers(moved)} changed"
        else:
            v1, why1 = INCONCLUSIVE, f"d_{m}'s interval {where} contains 0 and no off-ceiling layer changed measurably"
    if p.peak_late >= share:
        v2 = HOLDS
    elif p.peak_late < fail:
        v2 = FAILS
    else:
        v2 = INCONCLUSIVE
    late = [k for k in off if k > L / 2]
    why2 = f"{pct(p.peak_late)} of draws have their largest |d_l| of {layers(off)} in {layers(late)}"
    why2 += f" (holds from {share:.0%})"
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
    band: float = C13_BAND,
) -> Verdict:
    """C14 (amended, version 4), per fine-tuned task from the same draws, on the layers off the ceiling only:
    those whose reference rate's upper bound lies below 1 - ``band`` (C13's band). Not testable on this
    model with fewer than two such layers or none in l <= L/2 (the reason names the layers at the ceiling
    with their rates). A task where no off-ceiling layer's d_l interval excludes 0 is inconclusive,
    qualified "no change detected", with the power to detect a change of ``band`` at each of those layers
    (``stats.power_to_detect`` on the variance of d_l's draws). With f and m the first and last off-ceiling
    layer, "last beats first": d_m's interval excludes 0 and that of |d_m| - |d_f| lies above 0 (fails
    below 0, or where d_m did not change while another off-ceiling layer did); "peak late": at least
    ``peak_share`` of draws have their largest |d_l| among the off-ceiling layers in l > L/2 (fails below
    ``peak_fail``). A task with fewer than ``min_seeds`` fine-tune seeds is inconclusive. A task holds if
    both parts hold, fails if both fail, partly holds if one holds and the other fails, else is
    inconclusive; C14 holds if every task holds, fails if one fails, else is inconclusive if one is, else
    partly holds. ``control``: the random-initialisation model's |d_m| - |d_f|, the baseline."""
    if not tasks:
        return _not_run("C14", rule)
    first = next(iter(tasks.values()))
    off = _off_ceiling(first, band)
    untestable = _untestable(first, off, rule)
    if untestable is not None:
        return untestable
    parts = [_c14_task(name, p, off, rule, peak_share, peak_fail, min_seeds, band) for name, p in tasks.items()]
    overall = _overall([p.verdict for p in parts])
    return Verdict(
        "C14",
        overall,
        parts[0].estimate,
        parts[0].ci95,
        None if control is None else control.gap.estimate,
        f"the random-initialisation control's |d_{off[-1]}| - |d_{off[0]}| (it changes every layer)"
        if control is not None
        else "no random-initialisation control has results with these parameters",
        rule,
        f"judged on the layers off the ceiling, {layers(off)}; "
        + "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts),
        tuple(parts),
        qualifier=_qualifier(parts, overall) if overall == INCONCLUSIVE else "",
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
            estimate_of=C14_GAP_ORIGINAL,
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
        f"C14.{name}", v, gap.estimate, (gap.low, gap.high), None, "", rule, reason, parts, estimate_of=C14_GAP_ORIGINAL
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
        estimate_of=C14_GAP_ORIGINAL,
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
