"""Claims about context mixing (chapter 6): C9 to C12."""

from __future__ import annotations

from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    Interval,
    Verdict,
    combine_parts,
    interval_verdict,
    part_verdict,
)

# --------------------------------------------------------------------------------------------------
# C9-C11: context mixing (chapter 6)
# --------------------------------------------------------------------------------------------------


def judge_c9(step_diffs: list[Interval], last_minus_first: Interval, uniform: float, rule: str) -> Verdict:
    """C9: the own token's share falls monotonically with depth. ``step_diffs``: layer l+1 minus layer l."""
    steps = [interval_verdict(s, 0.0, "below")[0] for s in step_diffs]
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
    p1 = part_verdict("C9", "monotone", None, mono, why, rule)
    v2, why2 = interval_verdict(last_minus_first, 0.0, "below")
    p2 = part_verdict("C9", "decreasing", last_minus_first, v2, why2, rule, 0.0)
    # the paper's core statement is the decrease; monotonicity is the stronger part
    return combine_parts("C9", [p2, p1], rule, last_minus_first, uniform, "uniform mixing, 1/d_s")


C10_LOW, C10_HIGH = 0.55, 0.85  # own token on top at the last layer: the paper's ~70%, 15 points of tolerance


def judge_c10(top_is_self_last: Interval, chance: float, rule: str) -> Verdict:
    """C10: the own token is usually the largest contributor, about 30% lose that in the last layers."""
    base = dict(
        threshold=C10_LOW,
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
    _, why = interval_verdict(x, edge, "above" if edge == C10_LOW else "below")
    return Verdict(verdict=INCONCLUSIVE, reason=why, **base)


def judge_c11(
    near_minus_far: list[Interval], far_last_minus_first: Interval, position_only: float, rule: str
) -> Verdict:
    """C11: context is mostly local, and long-range contributions grow in later layers."""
    local = [interval_verdict(x, 0.0, "above")[0] for x in near_minus_far]
    lv = FAILS if FAILS in local else INCONCLUSIVE if INCONCLUSIVE in local else HOLDS
    p1 = part_verdict(
        "C11",
        "local",
        None,
        lv,
        "near neighbours outweigh far tokens in every layer"
        if lv == HOLDS
        else "; ".join(
            f"layer(s) {[i + 1 for i, v in enumerate(local) if v == kind]}: {what}"
            for kind, what in ((FAILS, "far tokens outweigh near ones"), (INCONCLUSIVE, "within noise"))
            if kind in local
        ),
        rule,
    )
    v2, why2 = interval_verdict(far_last_minus_first, 0.0, "above")
    p2 = part_verdict("C11", "long range grows", far_last_minus_first, v2, why2, rule, 0.0)
    return combine_parts(
        "C11",
        [p1, p2],
        rule,
        far_last_minus_first,
        position_only,
        "position-only model: the shares under uniform mixing over the positions present",
        first_is_core=False,
    )


CONTENT_TAGS = ("NOUN", "VERB", "ADJ", "ADV")  # content words, as the rule names them
FUNCTION_TAGS = ("DET", "ADP", "PRON", "CCONJ", "AUX")  # function words, as the rule names them


def judge_c12(
    special_minus_words: Interval | None, content_minus_function: Interval | None, uniform: float, rule: str
) -> Verdict:
    """C12: at the last layer [CLS]/[SEP] keep less of their own input than word tokens (they gather context),
    and content words keep more than function words. A part is not testable when its tokens are absent."""
    parts = []
    if special_minus_words is None:
        parts.append(
            part_verdict(
                "C12",
                "special tokens gather context",
                None,
                NOT_TESTABLE,
                "this tokenizer adds no special tokens to a sentence",
                rule,
            )
        )
    else:
        v, why = interval_verdict(special_minus_words, 0.0, "below")
        parts.append(part_verdict("C12", "special tokens gather context", special_minus_words, v, why, rule, 0.0))
    if content_minus_function is None:
        parts.append(
            part_verdict(
                "C12",
                "content words keep more",
                None,
                NOT_TESTABLE,
                "too few content or function words were tagged",
                rule,
            )
        )
    else:
        v, why = interval_verdict(content_minus_function, 0.0, "above")
        parts.append(part_verdict("C12", "content words keep more", content_minus_function, v, why, rule, 0.0))
    testable = [p for p in parts if p.verdict != NOT_TESTABLE]
    note = "uniform mixing, 1/d_s"
    if not testable:
        return Verdict(
            "C12", NOT_TESTABLE, None, None, uniform, note, rule, "; ".join(p.reason for p in parts), tuple(parts)
        )
    combined = combine_parts(
        "C12", testable, rule, special_minus_words or content_minus_function, uniform, note, first_is_core=False
    )
    reason = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts)
    return Verdict("C12", combined.verdict, combined.estimate, combined.ci95, uniform, note, rule, reason, tuple(parts))
