"""Which context-mixing measure to trust (chapter 10): C22 (raw attention is a poor guide, the paper's §5),
C23 (rollout and flow beat raw attention), C24 (the decomposition measures track exact HTA), C25 (the gradient
measures), C26 (exact HTA against an intervention) and C27 (Value Zeroing).

One definition serves every rule: a measure *tracks* a reference at layer l when the interval of its statistic
(mean over sentences of the median per-row Spearman correlation) lies above ``MEASURES_TAU`` and the paired
intervals of the statistic minus each null (rows shuffled within the sentence; the distance-only baseline) lie
above 0; it *does not track* when the interval lies below the threshold or a paired interval below 0; it is
*undecided* otherwise (:func:`state`). The rules then count layers. Each ``judge_*`` takes the threshold and
variant as keyword arguments, so the robustness alternatives call the same function.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.digits import fmt
from ..evidence.measures import MAIN, NO_OWN, ROLLED, LayerScore, MeasuresEvidence
from .core import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, PARTLY, Quantity, Rules, Verdict, with_robustness

MEASURES_TAU = 0.5  # 'tracks' needs the statistic's interval above this median per-row Spearman correlation
MEASURES_TAU_LOW = 0.4  # robustness: a lower threshold
MEASURES_TAU_HIGH = 0.6  # robustness: a higher threshold
MEASURES_MIN_SENTENCES = 50

TRACKS, NOT_TRACKS, UNDECIDED = "tracks", "does not track", "undecided"

QUANTITY = Quantity(
    "mean over sentences of the median per-row Spearman correlation with the reference (the lowest over the "
    "judged measures and layers)",
    r"\overline{\operatorname{med}_i \rho_s(c_{i\cdot}, r_{i\cdot})}",
)
RUN_IT = "`make measures` scores every measure on at least 50 sentences and records the run"


def _bounded(*intervals) -> bool:
    """Whether every interval is there with both bounds (a record of too few sentences has None bounds)."""
    return all(x is not None and x.low is not None and x.high is not None for x in intervals)


def state(s: LayerScore | None, tau: float = MEASURES_TAU) -> str:
    """:data:`TRACKS`, :data:`NOT_TRACKS` or :data:`UNDECIDED` for one score (module docstring); a missing
    score or one without intervals (or without their bounds) is undecided."""
    if s is None or not _bounded(s.statistic, s.minus_shuffled, s.minus_distance):
        return UNDECIDED
    x, a, b = s.statistic, s.minus_shuffled, s.minus_distance
    if x.low > tau and a.low > 0 and b.low > 0:
        return TRACKS
    if x.high < tau or a.high < 0 or b.high < 0:
        return NOT_TRACKS
    return UNDECIDED


def _states(ev: MeasuresEvidence, measure: str, reference: str, tau: float, variant: str) -> dict[int, str]:
    scores = ev.of(measure, reference, variant)
    return {layer: state(scores.get(layer), tau) for layer in range(1, ev.n_layers + 1)}


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


def _untestable(claim: str, ev: MeasuresEvidence, measures: Sequence[str], rule: str) -> Verdict | None:
    """NOT_RUN without scores, NOT_TESTABLE with too few sentences or an unsupported measure; else None."""
    if not ev.scores:
        return Verdict(claim, NOT_RUN, None, None, None, "", rule, f"no measure was scored in this build; {RUN_IT}")
    bare = {m.split(ROLLED)[0] for m in measures}
    unsupported = [f"{ev.name(m)} ({why})" for m, why in ev.unsupported if m in bare]
    if unsupported:
        why = f"not supported on this model: {'; '.join(unsupported)}"
        return Verdict(claim, NOT_TESTABLE, None, None, None, "", rule, why)
    if ev.n_sentences < MEASURES_MIN_SENTENCES:
        why = f"{ev.n_sentences} sentences scored, fewer than the rule's {MEASURES_MIN_SENTENCES}; {RUN_IT}"
        return Verdict(claim, NOT_TESTABLE, None, None, None, "", rule, why)
    return None


def _lowest(ev: MeasuresEvidence, measures: Sequence[str], reference: str, variant: str) -> LayerScore | None:
    scores = [s for m in measures for s in ev.of(m, reference, variant).values()]
    return min(scores, key=lambda s: s.statistic.estimate, default=None)


def _verdict(claim, verdict, ev, measures, reference, variant, rule, why, tau) -> Verdict:
    low = _lowest(ev, measures, reference, variant)
    est = None if low is None else low.statistic
    base = None if low is None else max(low.shuffled.estimate, low.distance.estimate)
    note = "the larger of the two nulls (rows shuffled within the sentence; distance only) at that layer"
    return Verdict(
        claim, verdict, None if est is None else est.estimate, None if est is None else (est.low, est.high), base,
        note, rule, why, threshold=tau, estimate_of=QUANTITY,
    )  # fmt: skip


def judge_every_layer(
    claim: str,
    ev: MeasuresEvidence,
    measures: Sequence[str],
    reference: str,
    rule: str,
    *,
    tau: float = MEASURES_TAU,
    variant: str = MAIN,
) -> Verdict:
    """C24-C27's shape: holds if every measure tracks the reference at every layer 1..L; fails if some measure
    does not track at half of the layers or more; partly holds if there is no failure but some measure does not
    track at some layer; inconclusive otherwise."""
    stop = _untestable(claim, ev, measures, rule)
    if stop:
        return stop
    per = {m: _states(ev, m, reference, tau, variant) for m in measures}
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
    return _verdict(claim, verdict, ev, measures, reference, variant, rule, why, tau)


def judge_c22(ev: MeasuresEvidence, rule: str, *, tau: float = MEASURES_TAU, variant: str = MAIN, measure: str = "raw"):
    """C22: holds if raw attention does not track exact HTA at half of the layers or more; fails if it tracks
    at every layer; partly holds if it does not track at some layer (fewer than half); inconclusive otherwise."""
    stop = _untestable("C22", ev, [measure], rule)
    if stop:
        return stop
    st = _states(ev, measure, "hta", tau, variant)
    n_not = sum(v == NOT_TRACKS for v in st.values())
    if 2 * n_not >= ev.n_layers:
        verdict = HOLDS
    elif all(v == TRACKS for v in st.values()):
        verdict = FAILS
    elif n_not:
        verdict = PARTLY
    else:
        verdict = INCONCLUSIVE
    why = f"{ev.name(measure)}: {_describe(st)} (against exact HTA, {n_not} of {ev.n_layers} layers not tracked)"
    return _verdict("C22", verdict, ev, [measure], "hta", variant, rule, why, tau)


def judge_c23(ev: MeasuresEvidence, rule: str, *, tau: float = MEASURES_TAU, variant: str = MAIN) -> Verdict:
    """C23: for rollout and flow, the paired difference against raw attention above 0 at every layer 2..L and
    tracking exact HTA at layer L (holds); fails if either lies below raw attention at half of the layers 2..L
    or more, or does not track at layer L; partly holds if no failure and each is above raw attention at some
    layer; inconclusive otherwise."""
    measures = ("rollout", "flow")
    stop = _untestable("C23", ev, [*measures, "raw"], rule)
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
        last = state(scores.get(ev.n_layers), tau)
        fail |= 2 * len(below) >= len(deeper) or last == NOT_TRACKS
        above_some &= bool(above)
        all_above &= len(above) == len(deeper) and last == TRACKS
        gaps = ", ".join(f"{k}: {fmt(d.estimate)}" for k, d in diffs.items() if d is not None)
        parts.append(f"{ev.name(m)} minus raw attention at layers {gaps}; above 0 at {len(above)} of {len(deeper)}, "
                     f"below at {len(below)}; {last} at layer {ev.n_layers}")  # fmt: skip
    verdict = FAILS if fail else HOLDS if all_above else PARTLY if above_some else INCONCLUSIVE
    return _verdict("C23", verdict, ev, measures, "hta", variant, rule, "; ".join(parts), tau)


def _alternatives(judge, names: dict[str, dict]) -> dict[str, Verdict]:
    return {name: judge(**kw) for name, kw in names.items()}


_COMMON_ALTERNATIVES = {
    "threshold low": {"tau": MEASURES_TAU_LOW},
    "threshold high": {"tau": MEASURES_TAU_HIGH},
    "own token": {"variant": NO_OWN},
}


def c22(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C22 under its rule, with its alternatives (thresholds, own token left out, raw attention rolled out)."""
    rule = rules.rule
    alts = _alternatives(lambda **kw: judge_c22(evidence, rule, **kw), _COMMON_ALTERNATIVES)
    alts["rolled"] = judge_c22(evidence, rule, measure="raw" + ROLLED)
    return with_robustness(judge_c22(evidence, rule), alts)


def c23(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C23 under its rule, with its alternatives."""
    rule = rules.rule
    alts = _alternatives(lambda **kw: judge_c23(evidence, rule, **kw), _COMMON_ALTERNATIVES)
    return with_robustness(judge_c23(evidence, rule), alts)


def _every_layer(claim, evidence, rules, measures, reference="hta", extra=None) -> Verdict:
    def judge(**kw):
        kw = {"measures": measures, "reference": reference, **kw}
        return judge_every_layer(claim, evidence, kw.pop("measures"), kw.pop("reference"), rules.rule, **kw)

    alts = _alternatives(judge, {**_COMMON_ALTERNATIVES, **(extra or {})})
    return with_robustness(judge(), alts)


DECOMPOSITION = ("norm_resln" + ROLLED, "globenc", "alti")
GRADIENT = ("grad_input", "integrated_gradients")


def c24(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C24: norm-based attention with residual and LayerNorm (rolled out), GlobEnc and ALTI against exact HTA."""
    return _every_layer("C24", evidence, rules, DECOMPOSITION)


def c25(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C25: gradient x input and Integrated Gradients against exact HTA."""
    return _every_layer("C25", evidence, rules, GRADIENT)


def c26(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C26: exact HTA against the intervention (mean input embedding; [MASK] as the alternative 'mask')."""
    return _every_layer("C26", evidence, rules, ("hta",), "intervention", {"mask": {"reference": "intervention_mask"}})


def c27(evidence: MeasuresEvidence, rules: Rules) -> Verdict:
    """C27: Value Zeroing rolled out against exact HTA (as it is, per layer, the alternative 'as it is')."""
    return _every_layer(
        "C27", evidence, rules, ("value_zeroing" + ROLLED,), extra={"as it is": {"measures": ("value_zeroing",)}}
    )
