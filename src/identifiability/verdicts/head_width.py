"""Predictions across the family of head widths (chapter 7): C19 (the threshold d_v + 2 on every member), C20
(C4's offset depends on d_s / d_v, not on d_v) and C21 (that offset is learned: absent on the untrained twins).

Every rule is judged on the members pre-trained here that are trained enough (held-out masked-token accuracy
at least ``FAMILY_MIN_GAIN`` above the unigram baseline's) and, where the rule says so, on their untrained twins;
an undertrained member is named in the reason and not judged. Each ``judge_c<N>`` takes its thresholds and
choices as keyword arguments, so the robustness alternatives of ``data/claims.csv`` call the same function; the
entry points :func:`c19`, :func:`c20` and :func:`c21` assemble the rule and its alternatives from the evidence
(:mod:`identifiability.evidence.head_width`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..base.digits import fmt, pct
from ..base.stats import Interval
from ..evidence.head_width import (
    C19Evidence,
    C19Model,
    C20Comparison,
    C20Evidence,
    C21Evidence,
    C21Model,
    FamilyModel,
    ResplitEvidence,
)
from ..nullspace import unique_share
from ..pretrain import family
from .core import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, PARTLY, Quantity, Rules, Verdict, with_robustness
from .nonidentifiability import (
    AT_DV1,
    AT_DV2,
    BETWEEN,
    C2_FAIL_SHARE,
    C2_MARGIN,
    C2_MARGIN_ALT,
    C2_UNIQUE_SHARE,
    C2_UNIQUE_SHARE_ALT,
    threshold_state,
)

FAMILY_MIN_GAIN = family.MIN_GAIN  # a member is judged when its held-out accuracy beats the unigram baseline's by this

C19_QUANTITY = Quantity(
    "smallest share, over the judged members, of (head, input) pairs unique at d_s = d_v + 1 (full rank of "
    "[T,1] above the margin)",
    r"\min_m \Pr[\operatorname{rank}\,[T,1] = d_s]",
)
C20_QUANTITY = Quantity(
    "largest |D(m) - D(m')| between compared members, D the mean paired difference of Pearson(A, A_eff) and "
    "Pearson(A, A projected onto a random subspace) over the common d_s / d_v range",
    r"\max |D_m - D_{m'}|",
)
C21_QUANTITY = Quantity(
    "largest D_sub over the judged members: mean over inputs with d_s >= d_v + 2 of the median over heads of "
    "Pearson(A, A_eff) minus Pearson(A, A projected onto a random subspace of the same rank)",
    r"\max_m \overline{r(A, A_{\mathrm{eff}}) - r(A, A_{\mathrm{rand}})}",
)


# --------------------------------------------------------------------------------------------------
# who is judged
# --------------------------------------------------------------------------------------------------


def judged(m: FamilyModel, min_gain: float = FAMILY_MIN_GAIN) -> bool:
    """A trained member that is trained enough: its accuracy gain over the unigram baseline at least
    ``min_gain`` (the provenance's ``trained_enough`` flag where the gain is unknown); a twin never is."""
    if m.twin:
        return False
    return m.accuracy_gain >= min_gain if m.accuracy_gain is not None else m.trained_enough


def _undertrained(models: Sequence[FamilyModel]) -> str:
    """'; not judged (undertrained): a, b' or ''."""
    names = sorted({m.name for m in models if not m.twin and not judged(m)})
    return f"; not judged (undertrained): {', '.join(names)}" if names else ""


def _twins_of(models: Sequence[FamilyModel], members: set[str]) -> list[FamilyModel]:
    """The twins of the judged ``members``."""
    return [m for m in models if m.twin and m.member in members]


# --------------------------------------------------------------------------------------------------
# C19: the threshold d_v + 2 on every member
# --------------------------------------------------------------------------------------------------


_STATE_WORDS = {AT_DV2: "threshold at d_v + 2", AT_DV1: "threshold at d_v + 1", BETWEEN: "neither threshold"}


def _c19_state(x: C19Model, share: float, needed: float, min_sentences: int) -> str:
    """C2's per-model decision (:func:`verdicts.nonidentifiability.threshold_state`) on the model's own d_v,
    with C19's extra condition: 'at d_v + 2' needs inputs cut from at least ``min_sentences`` sentences."""
    state = threshold_state(share, bool(x.alternatives_at_dv2), needed)
    if state == AT_DV2 and x.sentences < min_sentences:
        return "too few sentences"  # not 'at d_v + 2' however many pairs are unique
    return state


def judge_c19(
    models: Sequence[C19Model],
    rule: str,
    *,
    share: float = C2_UNIQUE_SHARE,
    margin: float = C2_MARGIN,
    min_sentences: int = 3,  # the rule's 'inputs cut from at least 3 different sentences'
) -> Verdict:
    """C19: every judged member and its twin at d_v + 2 (C2's rule on the model's own d_v, pairs unique above
    ``margin`` in at least ``share`` of them); fails if a judged member is at d_v + 1 or has a head without
    alternatives at d_v + 2; not testable with fewer than two judged members of different d_v; partly holds
    otherwise."""
    note = "the generic count d_s - d_v - 1 on each member's d_v: 0 at d_s = d_v + 1, so every pair unique"
    family = [x.model for x in models]
    members = [x for x in models if judged(x.model)]
    names = {x.model.name for x in members}
    rest = _undertrained(family)
    if len({x.model.d_v for x in members}) < 2:
        dvs = ", ".join(str(d) for d in sorted({x.model.d_v for x in members}))
        why = f"{len(members)} judged member(s) of d_v {dvs}: fewer than two d_v" if members else "no judged member"
        return Verdict("C19", NOT_TESTABLE, None, None, 1.0, note, rule, why + rest, estimate_of=C19_QUANTITY)
    twins = [x for x in models if x.model.twin and x.model.member in names]
    shares = {x.model.name: unique_share(x.margins, margin) for x in (*members, *twins)}
    states = {x.model.name: _c19_state(x, shares[x.model.name], share, min_sentences) for x in (*members, *twins)}
    parts = []
    for x in (*members, *twins):
        name, s = x.model.name, states[x.model.name]
        v = HOLDS if s == AT_DV2 else FAILS if s == AT_DV1 or x.alternatives_at_dv2 is False else PARTLY
        dv2 = {True: "every head", False: "not every head", None: "no input measured"}[x.alternatives_at_dv2]
        why = (
            f"d_v = {x.model.d_v}: {pct(shares[name])} of {len(x.margins)} pairs unique at d_s = d_v + 1 "
            f"({x.sentences} sentences); {dv2} with alternatives at d_v + 2; {_STATE_WORDS.get(s, s)}"
        )
        parts.append(
            Verdict(f"C19.{name}", v, shares[name], None, 1.0, "", rule, why, threshold=share, estimate_of=None)
        )
    at_dv1 = [x.model.name for x in members if states[x.model.name] == AT_DV1]
    no_alt = [x.model.name for x in members if x.alternatives_at_dv2 is False]
    if at_dv1 or no_alt:
        verdict = FAILS
        why = "; ".join(
            w
            for w in (
                f"at d_v + 1 (fewer than {pct(C2_FAIL_SHARE)} unique): {', '.join(at_dv1)}" if at_dv1 else "",
                f"some head admits no alternative at d_s = d_v + 2: {', '.join(no_alt)}" if no_alt else "",
            )
            if w
        )
    elif all(states[n] == AT_DV2 for n in states):
        verdict, why = HOLDS, f"every judged member ({len(members)}) and twin ({len(twins)}) is at d_v + 2"
    else:
        off = [f"{n} ({_STATE_WORDS.get(s, s)})" for n, s in states.items() if s != AT_DV2]
        verdict, why = PARTLY, f"not at d_v + 2: {', '.join(off)}"
    low = min(shares[x.model.name] for x in members)
    detail = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.reason}" for p in parts)
    return Verdict(
        "C19", verdict, low, None, 1.0, note, rule, f"{why}{rest}; {detail}", tuple(parts), share,
        estimate_of=C19_QUANTITY,
    )  # fmt: skip


RUN_IT = "`make family` pre-trains the family into data/models/ and records what this chapter measures on it"


def not_run(claim: str, rule: str, alternatives: Sequence[str]) -> Verdict:
    """The verdict of a build with no model of the family (none in data/models/, none named); its
    ``alternatives`` are not run either."""
    v = Verdict(claim, NOT_RUN, None, None, None, "", rule, f"this build has no model of the family; {RUN_IT}")
    return with_robustness(v, {name: v for name in alternatives})


def c19(evidence: C19Evidence, rules: Rules) -> Verdict:
    """C19 under its rule, with the alternatives ``share`` and ``margin``; not run without a model."""
    m, rule = evidence.models, rules.rule
    if not m:
        return not_run("C19", rule, ("share", "margin"))
    alternatives = {
        "share": judge_c19(m, rule, share=C2_UNIQUE_SHARE_ALT),
        "margin": judge_c19(m, rule, margin=C2_MARGIN_ALT),
    }
    return with_robustness(judge_c19(m, rule), alternatives)


# --------------------------------------------------------------------------------------------------
# C20: the offset depends on d_s / d_v, not on d_v
# --------------------------------------------------------------------------------------------------


def _inside(x: Interval, bound: float) -> str:
    """'inside' [-bound, bound], 'outside' (entirely), or 'overlaps'."""
    if x.low >= -bound and x.high <= bound:
        return "inside"
    if x.low > bound or x.high < -bound:
        return "outside"
    return "overlaps"


def judge_c20(
    models: Sequence[FamilyModel],
    comparison: C20Comparison,
    rule: str,
    *,
    bound: str = "interval",
    min_lengths: int = 3,  # the rule's 'inputs of fewer than 3 lengths' in the common range: not testable
) -> Verdict:
    """C20: every pair of compared (judged) members has its interval of D(m) - D(m') inside [-B, B], B the upper
    end of the seeds' |D(seed 0) - D(seed 1)| interval (``bound="estimate"``: its point estimate). Fails if some
    pair lies entirely outside, inconclusive otherwise; not testable without two judged seeds of one member,
    two judged compared members of different d_v, or inputs of at least ``min_lengths`` lengths in the
    common range."""
    c = comparison
    by_name = {m.name: m for m in models}
    ok = {n for n, m in by_name.items() if judged(m)}
    compared = [n for n in c.members if n in ok]
    pairs = [p for p in c.pairs if p.first in ok and p.second in ok]
    twin_sizes = [abs(p.difference.estimate) for p in c.twin_pairs if math.isfinite(p.difference.estimate)]
    baseline = max(twin_sizes) if twin_sizes else None
    note = "the largest |difference| between the compared members' untrained twins" + "".join(
        f"; {m.name} entropy {fmt(m.entropy)} nats" for m in models if m.entropy is not None
    )
    rest = _undertrained(models)
    seeds = [by_name[n] for n in c.seeds if n in by_name]
    missing = []
    if c.seed_difference is None or len(seeds) < 2 or not all(judged(m) for m in seeds):  # both seeds judged
        missing.append("two judged pre-training seeds of one member")
    if len({by_name[n].d_v for n in compared}) < 2:
        missing.append("two judged compared members of different d_v")
    if c.lengths < min_lengths:
        missing.append(f"inputs of at least {min_lengths} lengths in the common range (it holds {c.lengths})")
    if missing:
        why = "needs " + " and ".join(missing) + rest
        return Verdict("C20", NOT_TESTABLE, None, None, baseline, note, rule, why, estimate_of=C20_QUANTITY)
    s = c.seed_difference
    b = s.high if bound == "interval" else s.estimate
    range_ = f"d_s / d_v from {fmt(c.ratio_range[0])} to {fmt(c.ratio_range[1])}"
    if not math.isfinite(b) or not all(p.difference.has_interval for p in pairs):
        why = f"{range_}: too few inputs for an interval of the seed difference or of a pair" + rest
        return Verdict("C20", INCONCLUSIVE, None, None, baseline, note, rule, why, estimate_of=C20_QUANTITY)
    sides = {(p.first, p.second): _inside(p.difference, b) for p in pairs}
    parts = tuple(
        Verdict(
            f"C20.{p.first} - {p.second}",
            {"inside": HOLDS, "outside": FAILS, "overlaps": INCONCLUSIVE}[sides[(p.first, p.second)]],
            p.difference.estimate, (p.difference.low, p.difference.high), None, "", rule,
            f"{p.difference} {sides[(p.first, p.second)]} ±{fmt(b)}", threshold=b,
        )
        for p in pairs
    )  # fmt: skip
    # the bound rests on one pair of seeds (the design trains two of one member): the reason says so
    seed_text = f"seed bound {fmt(b)} from |D(seed 0) - D(seed 1)| of {c.seeds[0]} (one pair of seeds), {s}"
    outside = [f"{a} - {z}" for (a, z), v in sides.items() if v == "outside"]
    if outside:
        verdict, why = FAILS, f"entirely outside ±{fmt(b)}: {', '.join(outside)}"
    elif all(v == "inside" for v in sides.values()):
        verdict, why = HOLDS, f"every pair of {len(compared)} members lies inside ±{fmt(b)}"
    else:
        over = [f"{a} - {z}" for (a, z), v in sides.items() if v == "overlaps"]
        verdict, why = INCONCLUSIVE, f"overlapping the bound: {', '.join(over)}"
    largest = max(pairs, key=lambda p: abs(p.difference.estimate))
    detail = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.reason}" for p in parts)
    return Verdict(
        "C20", verdict, abs(largest.difference.estimate), None, baseline, note, rule,
        f"on {range_}; {seed_text}; {why}{rest}; {detail}", parts, b, estimate_of=C20_QUANTITY,
    )  # fmt: skip


def c20(evidence: C20Evidence, rules: Rules) -> Verdict:
    """C20 under its rule, with the alternatives ``bound`` and ``members`` (not testable where the half-width
    member was not measured); not run without a model."""
    e, rule = evidence, rules.rule
    if not e.models:
        return not_run("C20", rule, ("bound", "members"))
    if e.with_half_width is None:
        why = "the member of half the width with two heads of 32 was not measured"
        members = Verdict("C20", NOT_TESTABLE, None, None, None, "", rule, why)
    else:
        members = judge_c20(e.models, e.with_half_width, rule)
    alternatives = {"bound": judge_c20(e.models, e.comparison, rule, bound="estimate"), "members": members}
    return with_robustness(judge_c20(e.models, e.comparison, rule), alternatives)


# --------------------------------------------------------------------------------------------------
# C21: the offset is learned
# --------------------------------------------------------------------------------------------------


def _c21_part(x: Interval, twin: bool) -> str:
    """One model's part: a member holds below 0, fails above it; a twin holds where it does not lie below 0
    (partly: the offset is there before training); inconclusive without an interval or, for a member, one
    containing 0."""
    if not x.has_interval:
        return INCONCLUSIVE
    side = x.side(0.0)
    if twin:
        return PARTLY if side == "below" else HOLDS
    return {"below": HOLDS, "above": FAILS}.get(side, INCONCLUSIVE)


def judge_c21(models: Sequence[C21Model], rule: str, *, null: str = "both", by_heads: bool = False) -> Verdict:
    """C21: every judged member's D_sub and D_val intervals below 0 and no twin's D_sub interval below 0.
    Fails if some judged member's D_sub lies above 0; partly holds if every member's D_sub lies below 0 but
    some member's D_val does not, or some twin's D_sub lies below 0 too; inconclusive otherwise; not testable
    without a judged member. ``null="value weights"``: D_val alone decides the members' part (in D_sub's place
    throughout); ``by_heads``: intervals over heads."""
    note = "the twins' D_sub (the same architecture before training)"
    rest = _undertrained([x.model for x in models])
    members = [x for x in models if judged(x.model)]
    if not members:
        return Verdict("C21", NOT_TESTABLE, None, None, None, note, rule, "no judged member" + rest)
    twins = [x for x in models if x.model.twin and x.model.member in {m.model.name for m in members}]

    def sub(x: C21Model) -> Interval:
        return x.sub_by_heads if by_heads else x.sub

    def val(x: C21Model) -> Interval:
        return x.val_by_heads if by_heads else x.val

    main = val if null == "value weights" else sub  # the interval that decides a member's core part

    def side(x: C21Model) -> str:
        return main(x).side(0.0) if main(x).has_interval else "no interval"

    above = [x.model.name for x in members if side(x) == "above"]
    core_below = all(side(x) == "below" for x in members)
    val_not_below = [
        x.model.name for x in members if null == "both" and not (val(x).has_interval and val(x).side(0.0) == "below")
    ]
    twin_below = [x.model.name for x in twins if sub(x).has_interval and sub(x).side(0.0) == "below"]
    twin_open = [x.model.name for x in twins if not sub(x).has_interval]
    what = "D_val" if null == "value weights" else "D_sub"
    if above:
        verdict, why = FAILS, f"{what} lies above 0 on {', '.join(above)}"
    elif core_below and not val_not_below and not twin_below and not twin_open:
        verdict = HOLDS
        both = "D_val" if null == "value weights" else "D_sub and D_val"
        why = f"every judged member's {both} below 0, no twin's D_sub"
    elif core_below and (val_not_below or twin_below):
        bits = [f"D_val not below 0 on {', '.join(val_not_below)}" if val_not_below else "",
                f"the twin's D_sub below 0 too on {', '.join(twin_below)} (part of the offset is architecture)"
                if twin_below else ""]  # fmt: skip
        verdict, why = PARTLY, "; ".join(b for b in bits if b)
    else:
        open_ = [x.model.name for x in members if side(x) != "below"] + twin_open
        verdict, why = INCONCLUSIVE, f"an interval contains 0 or is missing: {', '.join(open_)}"
    parts = tuple(
        Verdict(
            f"C21.{x.model.name}", _c21_part(main(x) if not x.model.twin else sub(x), x.model.twin),
            sub(x).estimate, (sub(x).low, sub(x).high), None, "", rule,
            f"D_sub {sub(x)}; D_val {val(x)}" + (f"; entropy {fmt(x.model.entropy)} nats" if x.model.entropy else ""),
            threshold=0.0,
        )
        for x in (*members, *twins)
    )  # fmt: skip
    worst = max(members, key=lambda x: sub(x).estimate)
    twin = next((t for t in twins if t.model.member == worst.model.name), None)
    detail = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.reason}" for p in parts)
    return Verdict(
        "C21", verdict, sub(worst).estimate, (sub(worst).low, sub(worst).high),
        None if twin is None else sub(twin).estimate, note, rule, f"{why}{rest}; {detail}", parts, 0.0,
        estimate_of=C21_QUANTITY,
    )  # fmt: skip


def c21(evidence: C21Evidence, rules: Rules) -> Verdict:
    """C21 under its rule, with the alternatives ``null`` (D_val alone decides the members' part) and ``unit``
    (intervals over heads); not run without a model."""
    m, rule = evidence.models, rules.rule
    if not m:
        return not_run("C21", rule, ("null", "unit"))
    alternatives = {
        "null": judge_c21(m, rule, null="value weights"),
        "unit": judge_c21(m, rule, by_heads=True),
    }
    return with_robustness(judge_c21(m, rule), alternatives)


# The re-split family (issue 55): C28-C32, frozen before any claim quantity was computed on a healed member
RESPLIT_MIN_COSINE = 0.95  # healed: mean cosine with the book's model's hidden states at every layer, held-out text
RESPLIT_MIN_SPEARMAN = 0.95  # healed: Spearman of 500 sentence-pair similarities against the book's model's
C31_RATIO = 0.5  # the sink's output share over its attention weight must lie below this
C31_RATIO_ALT = 0.3  # robustness: a stricter ratio
RESPLIT_CLAIMS = ("C28", "C29", "C30", "C31", "C32")
RESPLIT_QUANTITIES = {
    "C28": Quantity("smallest share, over the healed members, of (head, input) pairs unique at d_s = d_v + 1"),
    "C29": Quantity("largest D_sub over the healed members"),
    "C30": Quantity("largest |D(m) - D(m')| between healed members of different d_v"),
    "C31": Quantity("largest median ratio of the sink's output share to its attention weight"),
    "C32": Quantity("largest ratio of the effective to the raw attention mass on the sink over the healed members"),
}
RUN_RESPLIT = "`make resplit` heals the re-split family and records it; chapter 7 then judges it"


def _resplit(claim: str, evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C28-C32 on the re-split family's record: "not run in this build" while it is not recorded, under every
    alternative the claim's row names (the same outcome: nothing was measured)."""
    from .claims import load_claims, robustness_names

    why = f"the re-split family has not been recorded: {RUN_RESPLIT}"
    if evidence.members:  # the study that reads the record lands with it (issue 55): never a made-up verdict
        why = f"the re-split family's record is not read by this version of the book: {RUN_RESPLIT}"
    v = Verdict(claim, NOT_RUN, None, None, None, "", rules.rule, why, estimate_of=RESPLIT_QUANTITIES[claim])
    row = next(c for c in load_claims() if c["id"] == claim)
    return with_robustness(v, {name: v for name in robustness_names(row)})


def c28(evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C28: the threshold at d_v + 2 on every healed re-split (C2's rule per member)."""
    return _resplit("C28", evidence, rules)


def c29(evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C29: C4's offset beyond dimension counting below 0 on every healed re-split."""
    return _resplit("C29", evidence, rules)


def c30(evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C30: the offset depends on d_s / d_v, not on d_v, within the procedure's own spread."""
    return _resplit("C30", evidence, rules)


def c31(evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C31: without a null space, the sink's output share lies well below its attention weight."""
    return _resplit("C31", evidence, rules)


def c32(evidence: ResplitEvidence, rules: Rules) -> Verdict:
    """C32: C18 on every healed re-split with a sink, on the joined inputs."""
    return _resplit("C32", evidence, rules)
