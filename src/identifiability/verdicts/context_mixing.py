"""Claims about context mixing (chapter 6): C9 to C12.

C10 and C11 were amended (``data/amendments.csv``): C10 is judged on a recorded run's token-weighted
sample, C11 on the mean contribution of one input token per window. Each judge takes its thresholds as
keyword arguments, so the robustness alternatives of ``data/claims.csv`` call the same function with moved
thresholds or intervals over another unit; the entry points :func:`c9` to :func:`c12` assemble the rule in
force, its alternatives and (C10, C11) the original rule's verdict from the evidence the chapter's studies
build (:mod:`identifiability.evidence.context_mixing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..base.stats import Interval, units_to_settle
from ..evidence.context_mixing import C9Evidence, C10Evidence, C11Evidence, C12Evidence
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    Quantity,
    Rules,
    Verdict,
    amended,
    combine_parts,
    interval_verdict,
    part_verdict,
    with_robustness,
)
from .text import layers

OWN_UNIFORM = Quantity("own-token share under uniform mixing (a share, not a difference)", r"1/d_s")


def _settle(xs: Sequence[Interval], threshold: float, unit: str) -> str:
    """Why intervals that contain ``threshold`` leave a part open, and how many units would settle all of
    them (the half-width shrinks like 1/sqrt(n): :func:`identifiability.base.stats.units_to_settle`)."""
    if any(not x.has_interval for x in xs):
        return f"no interval: too few {unit} to resample"
    needs = [units_to_settle(x.n, (x.low, x.high), x.estimate, threshold) for x in xs]
    if any(k is None for k in needs):
        return f"an estimate sits on {threshold:g}, so more {unit} would not settle it"
    them = "it" if len(xs) == 1 else "them"
    return f"about {max(needs)} {unit} instead of {max(x.n for x in xs)} would settle {them}"


def _per_layer(
    xs: Sequence[Interval], threshold: float, holds_if: str, first: int, unit: str, what: dict[str, str]
) -> tuple[str, str]:
    """One part over several layers: HOLDS if every interval lies on the ``holds_if`` side of ``threshold``,
    FAILS if one lies on the other side, else INCONCLUSIVE; the reason names the layers (numbered from
    ``first``) with ``what[verdict]`` and, for open ones, how many ``unit`` would settle them."""
    verdicts = [interval_verdict(x, threshold, holds_if)[0] for x in xs]
    failing = [first + i for i, v in enumerate(verdicts) if v == FAILS]
    open_ = [i for i, v in enumerate(verdicts) if v == INCONCLUSIVE]
    if not failing and not open_:
        return HOLDS, what[HOLDS]
    reasons = [f"{layers(failing)}: {what[FAILS]}"] if failing else []
    if open_:
        opened = [xs[i] for i in open_]
        reasons.append(
            f"{layers([first + i for i in open_])}: the interval contains {threshold:g}, "
            f"{_settle(opened, threshold, unit)}"
        )
    return (FAILS if failing else INCONCLUSIVE), "; ".join(reasons)


# --------------------------------------------------------------------------------------------------
# C9: the own token's contribution falls monotonically with depth
# --------------------------------------------------------------------------------------------------

C9_SHIFT = 0.005  # robustness 'threshold': a step falls when its interval lies below +0.005 instead of 0
C9_QUANTITY = Quantity(
    "median share of its own input token in a hidden token at the last layer minus at layer 1",
    r"s_{\mathrm{own}}^{L} - s_{\mathrm{own}}^{1}",
)
C9_STEP = Quantity(
    "change of the median own-token share at each layer step", r"s_{\mathrm{own}}^{l+1} - s_{\mathrm{own}}^{l}"
)


def judge_c9(
    step_diffs: Sequence[Interval],
    last_minus_first: Interval,
    uniform: float,
    rule: str,
    *,
    step_below: float = 0.0,
    unit: str = "sentences",
) -> Verdict:
    """C9, version 2: the own token's share falls from the first layer to the last (decreasing, the core:
    interval below 0 holds, above 0 fails, containing 0 open) and at every layer step (monotone: some step's
    interval above ``step_below`` fails, else some containing it open, else holds). ``step_diffs``: layer
    l+1 minus layer l. Both hold: holds; decreasing fails: fails; else either open: inconclusive (an open
    step's reason says how many units would settle it); else (decrease holds, a step rises): partly."""
    mono, why = _per_layer(
        step_diffs,
        step_below,
        "below",
        2,
        unit,
        {HOLDS: "every step falls", FAILS: f"the step to it does not fall (interval above {step_below:g})"},
    )
    p1 = part_verdict("C9", "monotone", None, mono, why, rule, step_below, C9_STEP)
    v2, why2 = interval_verdict(last_minus_first, 0.0, "below")
    p2 = part_verdict("C9", "decreasing", last_minus_first, v2, f"{last_minus_first}; {why2}", rule, 0.0, C9_QUANTITY)
    # the paper's core statement is the decrease; monotonicity is the stronger part
    v = combine_parts("C9", [p2, p1], rule, last_minus_first, uniform, "uniform mixing, 1/d_s")
    return replace(v, estimate_of=C9_QUANTITY, baseline_of=OWN_UNIFORM)


def judge_c9_original(step_diffs: Sequence[Interval], last_minus_first: Interval, uniform: float, rule: str) -> Verdict:
    """C9's pre-registered rule as its code decided it: version 2 only states the cases (an open step with
    the decrease holding was already inconclusive), so the original verdict is the same judge's."""
    return judge_c9(step_diffs, last_minus_first, uniform, rule)


def c9(evidence: C9Evidence, rules: Rules) -> Verdict:
    """C9 under its rule in force (version 2), with the alternatives ``threshold`` (steps below +C9_SHIFT)
    and ``unit`` (tokens), and the original rule's verdict."""
    e, rule = evidence, rules.rule
    v = judge_c9(e.steps, e.last_minus_first, e.uniform, rule)
    v = with_robustness(
        v,
        {
            "threshold": judge_c9(e.steps, e.last_minus_first, e.uniform, rule, step_below=C9_SHIFT),
            "unit": judge_c9(e.steps_by_tokens, e.last_minus_first_by_tokens, e.uniform, rule, unit="tokens"),
        },
    )
    return amended(v, judge_c9_original(e.steps, e.last_minus_first, e.uniform, rules.pre_registered))


# --------------------------------------------------------------------------------------------------
# C10: the own token usually stays the top contributor, about 30% lose that
# --------------------------------------------------------------------------------------------------

C10_LOW, C10_HIGH = 0.55, 0.85  # own token on top at the last layer: the paper's ~70%, 15 points of tolerance
C10_WIDE = 0.05  # robustness 'band wide' / 'band narrow': both bounds moved out / in by this much
C10_QUANTITY = Quantity(
    "share of hidden tokens whose largest contributor at the last layer is their own input token",
    r"\Pr[\operatorname{argmax}_j\, c^{L}_{ij} = i]",
)


def judge_c10(
    top_is_self_last: Interval, chance: float, rule: str, *, low: float = C10_LOW, high: float = C10_HIGH
) -> Verdict:
    """C10: the share of hidden tokens whose top contributor is their own input token lies in [``low``,
    ``high``] at the last layer, its interval inside; fails if the interval lies outside."""
    x = top_is_self_last
    base = dict(
        threshold=low,
        claim="C10",
        estimate=x.estimate,
        ci95=(x.low, x.high),
        baseline=chance,
        baseline_note="1/d_s: the own token on top by chance",
        rule=rule,
        estimate_of=C10_QUANTITY,
    )
    band = f"[{low:g}, {high:g}]"
    if not x.has_interval:
        _, why = interval_verdict(x, low, "above")
        return Verdict(verdict=INCONCLUSIVE, reason=why, **base)
    if low <= x.low and x.high <= high:
        return Verdict(verdict=HOLDS, reason=f"{x}; the interval lies in {band}", **base)
    if x.high < low or x.low > high:
        return Verdict(verdict=FAILS, reason=f"{x}; the interval lies outside {band}", **base)
    edge = low if x.low < low else high
    _, why = interval_verdict(x, edge, "above" if edge == low else "below")
    return Verdict(verdict=INCONCLUSIVE, reason=f"{x}; band {band}: {why}", **base)


def judge_c10_original(top_is_self_last: Interval, chance: float, rule: str) -> Verdict:
    """C10, original rule: the same band, on the exact sample the first code chose (the chapter's short
    sentences, which over-weight special tokens and short contexts)."""
    return judge_c10(top_is_self_last, chance, rule)


def c10(evidence: C10Evidence, rules: Rules) -> Verdict:
    """C10 under the amended rule on the recorded run's sample (with word and special tokens reported
    apart), its alternatives ``band wide``, ``band narrow`` and ``words only``, and the original rule's
    verdict; "not run in this build" (every alternative too) when there is no recorded run."""
    e, rule = evidence, rules.rule
    original = judge_c10_original(e.original, e.original_chance, rules.pre_registered)
    if e.share is None:  # the sample is a recorded heavy run; a few live sentences never decide
        why = f"{e.sample} (too heavy for a book build)"
        chance = "1/d_s: the own token on top by chance (not measured without the run)"
        v = replace(Verdict("C10", NOT_RUN, None, None, None, chance, rule, why), estimate_of=C10_QUANTITY)
        return amended(with_robustness(v, dict.fromkeys(("band wide", "band narrow", "words only"), v)), original)
    v = judge_c10(e.share, e.chance, rule)
    special = "none (the tokenizer adds none)" if e.special is None else str(e.special)
    v = replace(v, reason=f"{e.sample}; {v.reason}; word tokens {e.words}, special tokens {special}")
    alternatives = {
        "band wide": judge_c10(e.share, e.chance, rule, low=C10_LOW - C10_WIDE, high=C10_HIGH + C10_WIDE),
        "band narrow": judge_c10(e.share, e.chance, rule, low=C10_LOW + C10_WIDE, high=C10_HIGH - C10_WIDE),
        "words only": judge_c10(e.words, e.word_chance, rule),
    }
    return amended(with_robustness(v, alternatives), original)


# --------------------------------------------------------------------------------------------------
# C11: context mixing is mostly local, long-range contributions grow in later layers
# --------------------------------------------------------------------------------------------------

C11_NEAR, C11_FAR = 3, 8  # near: distances 1 to 3; far: beyond distance 8
C11_NEAR_ALT, C11_FAR_ALT = 2, 5  # robustness 'distances'
C11_WINDOWS = ((C11_NEAR, C11_FAR), (C11_NEAR_ALT, C11_FAR_ALT))  # what the chapter's study measures C11 at
C11_GROWTH = Quantity(
    "far share of the context (input tokens beyond distance {far}, the own token set aside) at the last layer "
    "minus at layer 1",
    r"f^{L} - f^{1}",
)
C11_LOCAL = Quantity(
    "mean contribution of one input token within distance {near} minus one beyond {far}, per layer",
    r"\bar c_{\mathrm{near}}^{l} - \bar c_{\mathrm{far}}^{l}",
)
C11_SHARE_GROWTH = Quantity(
    "context share beyond distance 8 at the last layer minus at layer 1 (window sums)",
    r"s_{\mathrm{far}}^{L} - s_{\mathrm{far}}^{1}",
)
C11_POSITION_ONLY = Quantity(
    "context share beyond distance 8 under uniform mixing (a share, not its growth)",
    r"s_{\mathrm{far}}^{\mathrm{uniform}}",
)


def _at(q: Quantity, near: int, far: int) -> Quantity:
    return replace(q, words=q.words.format(near=near, far=far))


def _c11_parts(
    near_minus_far: Sequence[Interval],
    growth: Interval,
    rule: str,
    near: int,
    far: int,
    unit: str,
    what: str,
    growth_of: Quantity,
) -> list[Verdict]:
    """The local part (per layer, near above far) and the long-range part (``growth`` above 0, measuring
    ``growth_of``)."""
    local, why = _per_layer(
        near_minus_far,
        0.0,
        "above",
        1,
        unit,
        {
            HOLDS: f"near {what} outweighs far in every layer",
            FAILS: f"far {what} (beyond {far}) outweighs near (within {near})",
        },
    )
    p1 = part_verdict("C11", "local", None, local, why, rule, 0.0, _at(C11_LOCAL, near, far))
    v2, why2 = interval_verdict(growth, 0.0, "above")
    p2 = part_verdict("C11", "long range grows", growth, v2, f"{growth}; {why2}", rule, 0.0, growth_of)
    return [p1, p2]


def judge_c11(
    near_minus_far: Sequence[Interval],
    far_share_growth: Interval,
    rule: str,
    *,
    near: int = C11_NEAR,
    far: int = C11_FAR,
    unit: str = "sentences",
) -> Verdict:
    """C11, version 4: at every layer one input token within ``near`` contributes more than one beyond
    ``far`` (intervals of the difference above 0: holds; one below: fails; else open), and the far share of
    the context, f = (contributions beyond ``far``) / (1 - own contribution), is larger at the last layer
    than at the first (``far_share_growth``'s interval above 0: holds; below: fails; containing 0: open).
    Both hold: holds; both fail: fails; either open: inconclusive; one holds, one fails: partly. Under
    uniform mixing over the context f = n_far / (d_s - 1) at every layer: the growth's baseline is 0."""
    growth_of = _at(C11_GROWTH, near, far)
    parts = _c11_parts(near_minus_far, far_share_growth, rule, near, far, unit, "per-token mean", growth_of)
    v = combine_parts(
        "C11",
        parts,
        rule,
        far_share_growth,
        0.0,
        "uniform mixing over the context: f = n_far/(d_s - 1) at every layer, so its growth is 0",
        first_is_core=False,
    )
    return replace(v, estimate_of=growth_of)


def judge_c11_original(
    near_minus_far: Sequence[Interval], far_last_minus_first: Interval, position_only: float, rule: str
) -> Verdict:
    """C11, original rule, on window sums: the context share within C11_NEAR exceeds the share beyond
    C11_FAR at every layer, and the share beyond C11_FAR grows from the first layer to the last."""
    parts = _c11_parts(
        near_minus_far, far_last_minus_first, rule, C11_NEAR, C11_FAR, "sentences", "share", C11_SHARE_GROWTH
    )
    v = combine_parts(
        "C11",
        parts,
        rule,
        far_last_minus_first,
        position_only,
        "position-only model: the shares under uniform mixing over the positions present",
        first_is_core=False,
    )
    return replace(v, estimate_of=C11_SHARE_GROWTH, baseline_of=C11_POSITION_ONLY)


def c11(evidence: C11Evidence, rules: Rules) -> Verdict:
    """C11 under its rule in force (version 4), its alternatives ``distances`` and ``unit``, and the original
    rule's verdict; the reason adds, beside the verdict and not part of it, version 3's far per-token mean
    growth and what dilution of the own token predicts of it. The evidence must be measured at the rule's
    windows (``C11_WINDOWS``)."""
    e, rule = evidence, rules.rule
    if tuple(e.windows) != C11_WINDOWS:
        raise ValueError(f"C11's evidence was measured at the windows {e.windows}, its rule's are {C11_WINDOWS}")
    v = judge_c11(e.near_minus_far, e.far_share_growth, rule)
    v = replace(
        v,
        reason=(
            f"{v.reason}; beside it, not judged: one far token's mean contribution grows by {e.far_growth}, "
            f"dilution of the own token alone predicts {e.dilution_growth}, observed minus predicted "
            f"{e.far_growth_minus_dilution}"
        ),
    )
    alternatives = {
        "distances": judge_c11(e.near_minus_far_alt, e.far_share_growth_alt, rule, near=C11_NEAR_ALT, far=C11_FAR_ALT),
        "unit": judge_c11(e.near_minus_far_by_tokens, e.far_share_growth_by_tokens, rule, unit="tokens"),
    }
    original = judge_c11_original(
        e.original_near_minus_far, e.original_far_growth, e.position_only, rules.pre_registered
    )
    return amended(with_robustness(v, alternatives), original)


# --------------------------------------------------------------------------------------------------
# C12: special tokens gather context, content words keep more of their own identity
# --------------------------------------------------------------------------------------------------


C12_SPECIAL = Quantity(
    "own-token share of the special tokens minus the median word token's, last layer",
    r"s_{\mathrm{own}}^{\mathrm{special}} - s_{\mathrm{own}}^{\mathrm{word}}",
)
C12_CONTENT = Quantity(
    "own-token share of content words minus function words', last layer",
    r"s_{\mathrm{own}}^{\mathrm{content}} - s_{\mathrm{own}}^{\mathrm{function}}",
)


def _c12_part(name: str, x: Interval | None, holds_if: str, absent: str, rule: str, q: Quantity) -> Verdict:
    if x is None:
        return part_verdict("C12", name, None, NOT_TESTABLE, absent, rule, estimate_of=q)
    v, why = interval_verdict(x, 0.0, holds_if)
    return part_verdict("C12", name, x, v, f"{x}; {why}", rule, 0.0, q)


def judge_c12(
    special_minus_words: Interval | None, content_minus_function: Interval | None, uniform: float, rule: str
) -> Verdict:
    """C12: at the last layer [CLS]/[SEP] keep less of their own input than word tokens (they gather context),
    and content words keep more than function words. A part is not testable when its tokens are absent; with
    too few sentences to resample it is inconclusive."""
    parts = [
        _c12_part(
            "special tokens gather context",
            special_minus_words,
            "below",
            "this tokenizer adds no special tokens to a sentence",
            rule,
            C12_SPECIAL,
        ),
        _c12_part(
            "content words keep more",
            content_minus_function,
            "above",
            "no sentence has both content and function words tagged",
            rule,
            C12_CONTENT,
        ),
    ]
    testable = [p for p in parts if p.verdict != NOT_TESTABLE]
    note = "uniform mixing, 1/d_s"
    if not testable:
        return Verdict(
            "C12",
            NOT_TESTABLE,
            None,
            None,
            uniform,
            note,
            rule,
            "; ".join(p.reason for p in parts),
            tuple(parts),
            baseline_of=OWN_UNIFORM,
        )
    combined = combine_parts(
        "C12", testable, rule, special_minus_words or content_minus_function, uniform, note, first_is_core=False
    )
    reason = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts)
    # a verdict from one part says which: the other part's tokens are absent, so less than the claim was tested
    only = "" if len(testable) == len(parts) else f"{testable[0].claim.split('.', 1)[1]} part only"
    q = C12_SPECIAL if special_minus_words is not None else C12_CONTENT
    return replace(combined, reason=reason, parts=tuple(parts), qualifier=only, estimate_of=q, baseline_of=OWN_UNIFORM)


def c12(evidence: C12Evidence, rules: Rules) -> Verdict:
    """C12 under its rule, with the alternatives ``content without ADV`` and ``unit`` (tokens)."""
    e, rule = evidence, rules.rule
    v = judge_c12(e.special_minus_words, e.content_minus_function, e.uniform, rule)
    alternatives = {
        "content without ADV": judge_c12(e.special_minus_words, e.content_minus_function_no_adv, e.uniform, rule),
        "unit": judge_c12(e.special_minus_words_by_tokens, e.content_minus_function_by_tokens, e.uniform, rule),
    }
    return with_robustness(v, alternatives)
