"""Which context-mixing measure to trust (chapter 10): C22 (raw attention is a poor guide, the paper's §5),
C23 (rollout and flow beat raw attention), C24 (the decomposition measures track exact HTA), C25 (the gradient
measures), C26 (exact HTA against an intervention) and C27 (Value Zeroing).

One definition of *tracks* serves every rule in force (C22 version 2, ``data/amendments.csv``): per sentence the
stronger null is the larger of the two nulls' statistics (rows shuffled within the sentence; the distance-only
baseline); the margin at layer l is ``MEASURES_MARGIN`` x (1 - the mean over sentences of the stronger null); a
measure *tracks* the reference at l when the interval of its paired difference from the stronger null lies above
the margin, *does not track* when it lies below, and is *undecided* otherwise (:func:`state`). The original rules
(version 1) needed the statistic's interval above ``MEASURES_TAU`` and above each null by any amount
(:func:`state_original`); every verdict carries that rule's verdict too. The rules then count layers. Each
``judge_*`` takes the definition (:class:`Tracking`), the variant and what is compared as keyword arguments, so
the robustness alternatives and the original rule call the same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..base.digits import fmt
from ..evidence.measures import MAIN, NO_OWN, ROLLED, LayerScore, MeasuresEvidence
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
    with_robustness,
)  # fmt: skip

MEASURES_TAU = 0.5  # the original rules: 'tracks' needs the statistic's interval above this correlation
MEASURES_MARGIN = 0.25  # the rules in force: the margin's share of the gap between the stronger null and 1
MEASURES_MARGIN_LOW = 0.1  # robustness: a smaller share
MEASURES_MARGIN_HIGH = 0.5  # robustness: a larger share
MEASURES_MIN_SENTENCES = 50

TRACKS, NOT_TRACKS, UNDECIDED = "tracks", "does not track", "undecided"

# the references of one layer (C22's, C26's and C27's robustness rows), named where a build has no score of them
HTA_LAYER, INTERVENTION_LAYER = "hta_layer", "intervention_layer"
_WORDS = {HTA_LAYER: "exact HTA of layer l alone", INTERVENTION_LAYER: "the one-layer intervention"}

QUANTITY = Quantity(
    "mean over sentences of the paired difference of the median per-row Spearman correlation with the reference "
    "minus the stronger null's (the judged measure and layer lowest against its margin)",
    r"\overline{\rho_s - \max(\rho_s^{\mathrm{shuffled}}, \rho_s^{\mathrm{distance}})}",
)
QUANTITY_ORIGINAL = Quantity(
    "mean over sentences of the median per-row Spearman correlation with the reference (the lowest over the "
    "judged measures and layers)",
    r"\overline{\operatorname{med}_i \rho_s(c_{i\cdot}, r_{i\cdot})}",
)
RUN_IT = "`make measures` scores every measure on at least 50 sentences and records the run"


def _bounded(*intervals) -> bool:
    """Whether every interval is there with both bounds (a record of too few sentences has None bounds)."""
    return all(x is not None and x.low is not None and x.high is not None for x in intervals)


def margin(s: LayerScore, share: float = MEASURES_MARGIN) -> float | None:
    """The margin of ``s``'s layer: ``share`` x (1 - the mean over sentences of the stronger null); None where
    the score has no stronger null (a run recorded before C22 version 2)."""
    if s.stronger is None:
        return None
    return share * (1.0 - s.stronger.estimate)


def state(s: LayerScore | None, share: float = MEASURES_MARGIN) -> str:
    """:data:`TRACKS`, :data:`NOT_TRACKS` or :data:`UNDECIDED` for one score under the rules in force (module
    docstring); a missing score or one without the paired difference from the stronger null (or its bounds)
    is undecided."""
    if s is None or s.stronger is None or not _bounded(s.minus_stronger):
        return UNDECIDED
    m, d = margin(s, share), s.minus_stronger
    if d.low > m:
        return TRACKS
    if d.high < m:
        return NOT_TRACKS
    return UNDECIDED


def state_original(s: LayerScore | None, tau: float = MEASURES_TAU) -> str:
    """The original rules' states: tracks when the statistic's interval lies above ``tau`` and the paired
    intervals of the statistic minus each null above 0; does not track when the interval lies below ``tau`` or
    a paired interval below 0; undecided otherwise (and for a missing score or one without bounds)."""
    if s is None or not _bounded(s.statistic, s.minus_shuffled, s.minus_distance):
        return UNDECIDED
    x, a, b = s.statistic, s.minus_shuffled, s.minus_distance
    if x.low > tau and a.low > 0 and b.low > 0:
        return TRACKS
    if x.high < tau or a.high < 0 or b.high < 0:
        return NOT_TRACKS
    return UNDECIDED


@dataclass(frozen=True)
class Tracking:
    """Which definition of 'tracks' a judge applies: the rules in force (a margin of ``share`` of the gap
    between the stronger null and 1) or, with ``original``, the pre-registered rules (the bar
    :data:`MEASURES_TAU` and both nulls)."""

    share: float = MEASURES_MARGIN
    original: bool = False

    def __call__(self, s: LayerScore | None) -> str:
        return state_original(s) if self.original else state(s, self.share)


IN_FORCE, ORIGINAL = Tracking(), Tracking(original=True)


def _states(ev: MeasuresEvidence, measure: str, reference: str, tracking: Tracking, variant: str) -> dict[int, str]:
    scores = ev.of(measure, reference, variant)
    return {layer: tracking(scores.get(layer)) for layer in range(1, ev.n_layers + 1)}


def _describe(states: dict[int, str]) -> str:
    """'tracks at layers 1, 2; does not track at 3; undecided at 4'."""
    out = []
    for word in (TRACKS, NOT_TRACKS, UNDECIDED):
        layers = [str(k) for k, v in states.items() if v == word]
        if layers:
            out.append(f"{word} at layer{'s' if len(layers) > 1 else ''} {', '.join(layers)}")
    return "; ".join(out)


def _lower(name: str) -> str:
    """A name inside a sentence: 'Exact HTA' -> 'exact HTA' ('ALTI', 'GlobEnc' stay as they are)."""
    first = name.split(" ", 1)[0]
    return name if any(c.isupper() for c in first[1:]) else name[:1].lower() + name[1:]


def _name(ev: MeasuresEvidence, key: str) -> str:
    """The reader's name of a key, also for a reference this build has no score of (the evidence names only
    what was scored)."""
    return ev.name(key) if key in dict(ev.names) or key not in _WORDS else _WORDS[key]


def _untestable(
    claim: str, ev: MeasuresEvidence, judged: Sequence[tuple[str, str]], rule: str, tracking: Tracking, variant: str
) -> Verdict | None:
    """NOT_RUN without scores, NOT_TESTABLE with too few sentences or an unsupported measure, NOT_RUN where a
    judged (measure, reference) has no score in this build or (rules in force) its scores were recorded before
    the stronger null; else None."""
    if not ev.scores:
        return Verdict(claim, NOT_RUN, None, None, None, "", rule, f"no measure was scored in this build; {RUN_IT}")
    bare = {m.split(ROLLED)[0] for m, _ in judged}
    unsupported = [f"{ev.name(m)} ({why})" for m, why in ev.unsupported if m in bare]
    if unsupported:
        why = f"not supported on this model: {'; '.join(unsupported)}"
        return Verdict(claim, NOT_TESTABLE, None, None, None, "", rule, why)
    if ev.n_sentences < MEASURES_MIN_SENTENCES:
        why = f"{ev.n_sentences} sentences scored, fewer than the rule's {MEASURES_MIN_SENTENCES}; {RUN_IT}"
        return Verdict(claim, NOT_TESTABLE, None, None, None, "", rule, why)
    missing = [f"{_lower(_name(ev, m))} against {_lower(_name(ev, r))}" for m, r in judged if not ev.of(m, r, variant)]
    if missing:
        left_out = f" ({NO_OWN})" if variant == NO_OWN else ""
        why = f"no scores of {'; '.join(missing)}{left_out} in this build; {RUN_IT}"
        return Verdict(claim, NOT_RUN, None, None, None, "", rule, why)
    if not tracking.original and any(s.stronger is None for m, r in judged for s in ev.of(m, r, variant).values()):
        why = (
            "the scores were recorded before 'tracks' had a margin: they hold no paired difference from the "
            f"stronger null; {RUN_IT} again"
        )
        return Verdict(claim, NOT_RUN, None, None, None, "", rule, why)
    return None


def _verdict(claim, verdict, ev, judged, variant, rule, why, tracking: Tracking) -> Verdict:
    """The verdict with its estimate: under the rules in force the paired difference from the stronger null of
    the judged cell lowest against its margin (the threshold: that margin); under the original rules the lowest
    statistic (the threshold: :data:`MEASURES_TAU`)."""
    cells = [s for m, r in judged for s in ev.of(m, r, variant).values()]
    if tracking.original:
        low = min(cells, key=lambda s: s.statistic.estimate, default=None)
        est = None if low is None else low.statistic
        base = None if low is None else max(low.shuffled.estimate, low.distance.estimate)
        note = "the larger of the two nulls (rows shuffled within the sentence; distance only) at that layer"
        threshold, quantity = MEASURES_TAU, QUANTITY_ORIGINAL
    else:
        cells = [s for s in cells if s.minus_stronger is not None]
        low = min(cells, key=lambda s: s.minus_stronger.estimate - margin(s, tracking.share), default=None)
        est = None if low is None else low.minus_stronger
        base, threshold = (None, None) if low is None else (0.0, margin(low, tracking.share))
        note = (
            "a measure no better than the stronger null (per sentence the larger of rows shuffled within the "
            f"sentence and distance only) scores 0; the margin is {tracking.share:g} of the gap between that "
            "null and 1"
        )
        quantity = QUANTITY
    return Verdict(
        claim, verdict, None if est is None else est.estimate, None if est is None else (est.low, est.high), base,
        note, rule, why, threshold=threshold, estimate_of=quantity,
    )  # fmt: skip


def judge_every_layer(
    claim: str,
    ev: MeasuresEvidence,
    measures: Sequence[str],
    reference: str,
    rule: str,
    *,
    tracking: Tracking = IN_FORCE,
    variant: str = MAIN,
) -> Verdict:
    """C24-C27's shape: holds if every measure tracks the reference at every layer 1..L; fails if some measure
    does not track at half of the layers or more; partly holds if there is no failure but some measure does not
    track at some layer; inconclusive otherwise."""
    judged = [(m, reference) for m in measures]
    stop = _untestable(claim, ev, judged, rule, tracking, variant)
    if stop:
        return stop
    per = {m: _states(ev, m, reference, tracking, variant) for m in measures}
    counts = {m: sum(v == NOT_TRACKS for v in st.values()) for m, st in per.items()}
    if any(2 * c >= ev.n_layers for c in counts.values()):
        verdict = FAILS
    elif all(v == TRACKS for st in per.values() for v in st.values()):
        verdict = HOLDS
    elif any(counts.values()):
        verdict = PARTLY
    else:
        verdict = INCONCLUSIVE
    why = "; ".join(f"{ev.name(m)}: {_describe(st)}" for m, st in per.items())
    why += f" (against {_lower(ev.name(reference))})"
    return _verdict(claim, verdict, ev, judged, variant, rule, why, tracking)


def judge_c22(
    ev: MeasuresEvidence,
    rule: str,
    *,
    tracking: Tracking = IN_FORCE,
    variant: str = MAIN,
    measure: str = "raw",
    reference: str = "hta",
) -> Verdict:
    """C22: holds if raw attention does not track exact HTA (from the input) at half of the layers or more; fails
    if it tracks at every layer; partly holds if it does not track at some layer (fewer than half); inconclusive
    otherwise."""
    stop = _untestable("C22", ev, [(measure, reference)], rule, tracking, variant)
    if stop:
        return stop
    st = _states(ev, measure, reference, tracking, variant)
    n_not = sum(v == NOT_TRACKS for v in st.values())
    if 2 * n_not >= ev.n_layers:
        verdict = HOLDS
    elif all(v == TRACKS for v in st.values()):
        verdict = FAILS
    elif n_not:
        verdict = PARTLY
    else:
        verdict = INCONCLUSIVE
    against = _lower(ev.name(reference))
    why = f"{ev.name(measure)}: {_describe(st)} (against {against}, {n_not} of {ev.n_layers} layers not tracked)"
    return _verdict("C22", verdict, ev, [(measure, reference)], variant, rule, why, tracking)


def judge_c23(ev: MeasuresEvidence, rule: str, *, tracking: Tracking = IN_FORCE, variant: str = MAIN) -> Verdict:
    """C23: for rollout and flow, the paired difference against raw attention above 0 at every layer 2..L and
    tracking exact HTA at layer L (holds); fails if either lies below raw attention at half of the layers 2..L
    or more, or does not track at layer L; partly holds if no failure and each is above raw attention at some
    layer; inconclusive otherwise."""
    measures = ("rollout", "flow")
    judged = [(m, "hta") for m in (*measures, "raw")]
    stop = _untestable("C23", ev, judged, rule, tracking, variant)
    if stop:
        return stop
    deeper = range(2, ev.n_layers + 1)
    fail, above_some, parts = False, True, []
    all_above = True
    for m in measures:
        scores = ev.of(m, "hta", variant)
        diffs = {k: scores[k].minus_raw if k in scores and _bounded(scores[k].minus_raw) else None for k in deeper}
        above = [k for k, d in diffs.items() if d is not None and d.low > 0]
        below = [k for k, d in diffs.items() if d is not None and d.high < 0]
        last = tracking(scores.get(ev.n_layers))
        fail |= 2 * len(below) >= len(deeper) or last == NOT_TRACKS
        above_some &= bool(above)
        all_above &= len(above) == len(deeper) and last == TRACKS
        gaps = ", ".join(f"{k}: {fmt(d.estimate)}" for k, d in diffs.items() if d is not None)
        parts.append(f"{ev.name(m)} minus raw attention at layers {gaps}; above 0 at {len(above)} of {len(deeper)}, "
                     f"below at {len(below)}; {last} at layer {ev.n_layers}")  # fmt: skip
    verdict = FAILS if fail else HOLDS if all_above else PARTLY if above_some else INCONCLUSIVE
    judged = [(m, "hta") for m in measures]
    return _verdict("C23", verdict, ev, judged, variant, rule, "; ".join(parts), tracking)


# the alternatives every claim's row names: the margin's share, and each row's own token left out
_COMMON_ALTERNATIVES = {
    "margin low": {"tracking": Tracking(MEASURES_MARGIN_LOW)},
    "margin high": {"tracking": Tracking(MEASURES_MARGIN_HIGH)},
    "own token": {"variant": NO_OWN},
}


def _judged(judge, rules: Rules, extra: dict[str, dict] | None = None) -> Verdict:
    """``judge(rule, **kw)`` under the rule in force, with the common alternatives and ``extra`` (in the order
    the claims table names them), carrying the original rule's verdict. An alternative not run in this build
    (a reference not computed) is named with why in the verdict's reason."""
    v = judge(rules.rule)
    alts = {name: judge(rules.rule, **kw) for name, kw in {**_COMMON_ALTERNATIVES, **(extra or {})}.items()}
    unrun = [f"{name}, {a.reason.removesuffix('; ' + RUN_IT)}" for name, a in alts.items() if a.verdict == NOT_RUN]
    if unrun and v.verdict != NOT_RUN:
        v = replace(v, reason=f"{v.reason}; robustness rows not run: {'; '.join(unrun)}")
    return amended(with_robustness(v, alts), judge(rules.pre_registered, tracking=ORIGINAL))


def c22(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C22 under its rule in force (raw attention as it is against exact HTA from the input), its alternatives
    (the margin's share, own token left out, raw attention rolled out, against exact HTA of layer l alone) and
    its original rule's verdict."""
    extra = {"rolled": {"measure": "raw" + ROLLED}, "one layer": {"reference": HTA_LAYER}}
    return _judged(lambda rule, **kw: judge_c22(evidence, rule, **kw), rules, extra)


def c23(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C23 under its rule in force, its alternatives and its original rule's verdict."""
    return _judged(lambda rule, **kw: judge_c23(evidence, rule, **kw), rules)


def _every_layer(claim, evidence, rules, measures, reference="hta", extra=None) -> Verdict:
    def judge(rule, **kw):
        kw = {"measures": measures, "reference": reference, **kw}
        return judge_every_layer(claim, evidence, kw.pop("measures"), kw.pop("reference"), rule, **kw)

    return _judged(judge, rules, extra)


DECOMPOSITION = ("norm_resln" + ROLLED, "globenc", "alti")
GRADIENT = ("grad_input", "integrated_gradients")


def c24(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C24: norm-based attention with residual and LayerNorm (rolled out), GlobEnc and ALTI against exact HTA."""
    return _every_layer("C24", evidence, rules, DECOMPOSITION)


def c25(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C25: gradient x input and Integrated Gradients against exact HTA."""
    return _every_layer("C25", evidence, rules, GRADIENT)


def c26(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C26: exact HTA against the intervention (mean input embedding); alternatives 'mask' ([MASK]) and 'one
    layer' (exact HTA of layer l alone against the one-layer intervention)."""
    extra = {
        "mask": {"reference": "intervention_mask"},
        "one layer": {"measures": (HTA_LAYER,), "reference": INTERVENTION_LAYER},
    }
    return _every_layer("C26", evidence, rules, ("hta",), "intervention", extra)


def c27(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C27: Value Zeroing rolled out against exact HTA from the input; alternative 'as it is' (Value Zeroing of
    layer l against exact HTA of layer l alone)."""
    extra = {"as it is": {"measures": ("value_zeroing",), "reference": HTA_LAYER}}
    return _every_layer("C27", evidence, rules, ("value_zeroing" + ROLLED,), extra=extra)
