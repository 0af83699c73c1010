"""Claims about attention weights (chapter 2): non-identifiability and the review's two objections. Counts
over every head: exact, no sampling, so the robustness alternatives move tolerances and shares, not units.

Each claim's entry point ``c<N>(evidence, rules)`` applies the rule in force, its alternatives and (C1, C2
and C16, amended in ``data/amendments.csv``) the original rule's verdict; the ``judge_c<N>`` functions are
its per-threshold parts, which the controls also call."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..base.digits import fmt, pct
from ..base.stats import Interval
from ..evidence.nonidentifiability import C1Evidence, C2Evidence, C3Evidence, C15Evidence, C16Evidence, C17Evidence
from ..nullspace import unique_share
from .core import (
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    PARTLY,
    Quantity,
    Rules,
    Verdict,
    amended,
    combine_parts,
    with_robustness,
)

C1_RANK_TOL_ALT = 1e-6  # the robustness alternative's relative rank tolerance (the book's: max(d_s, d+1) * eps)
C1_QUANTITY = Quantity("smallest input length from which every head admits alternatives", r"d_s^{\min}", "tokens", True)
C2_QUANTITY = Quantity(
    "share of (head, input) pairs with a single solution at d_s = d_v + 1 (full rank of [T,1])",
    r"\Pr[\operatorname{rank}\,[T,1] = d_s]",
)
C3_QUANTITY = Quantity("share of the paper's constructed alternatives that fail the exact realisability test")


def min_dims(table: pd.DataFrame, rtol: float | None = None) -> dict[int, int]:
    """d_s -> smallest dim LN([T,1]) over heads, from ``nullspace.null_space_table`` rows (``d_s``,
    ``dim_LN_T1``, ``kept_min_T1``: the smallest singular value counted in the rank, relative to the largest).
    With ``rtol`` a head whose ``kept_min_T1`` is at or below it loses at least one rank: its dimension is
    counted one higher (a lower bound, exact for C1's question, dim >= 1)."""
    dims = table.dim_LN_T1 + ((table.kept_min_T1 <= rtol).astype(int) if rtol is not None else 0)
    return {int(n): int(k) for n, k in dims.groupby(table.d_s).min().items()}


def _c1_original(min_dim_by_ds: dict[int, int], d_v: int, rule: str) -> Verdict:
    """C1 under its first rule: every measured length past d_v is read, whichever lengths were measured."""
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


def _c1(min_dim_by_ds: dict[int, int], d_v: int, rule: str) -> Verdict:
    """C1 under its amended rule: as the first, but a survey without an input of d_v + 1 or of d_v + 2 tokens
    cannot place the threshold, so only a failing head decides there; the reason names the missing length."""
    v = _c1_original(min_dim_by_ds, d_v, rule)
    missing = [f"d_v + {k} = {d_v + k}" for k in (1, 2) if d_v + k not in min_dim_by_ds]
    if v.verdict in (FAILS, NOT_TESTABLE) or not missing:
        return v
    why = f"the survey holds no input of d_s = {' or of '.join(missing)} tokens, where the threshold is decided"
    return replace(v, verdict=NOT_TESTABLE, reason=f"{why}; at the lengths measured, {v.reason}")


def judge_c1(table: pd.DataFrame, d_v: int, rule: str) -> Verdict:
    """C1, amended rule: non-identifiable for every d_s > d_v, judged only where the survey holds inputs of
    d_v + 1 and of d_v + 2 tokens (else not testable, unless a head fails). ``table``: one row per (text,
    layer, head) of ``nullspace.null_space_table``; the lengths it holds are those measured. The estimate is
    the smallest d_s from which every head admits alternatives; robustness: the same with a rank tolerance of
    ``C1_RANK_TOL_ALT``."""
    v = replace(_c1(min_dims(table), d_v, rule), estimate_of=C1_QUANTITY)
    return with_robustness(v, {"tolerance": _c1(min_dims(table, C1_RANK_TOL_ALT), d_v, rule)})


def judge_c1_original(table: pd.DataFrame, d_v: int, rule: str) -> Verdict:
    """C1's original rule: every measured length past d_v read, with no check that d_v + 1 and d_v + 2 were
    measured (an absent length read as agreement)."""
    return replace(_c1_original(min_dims(table), d_v, rule), estimate_of=C1_QUANTITY)


C2_UNIQUE_SHARE = 0.95  # share of real (head, input) pairs with a single row-stochastic solution at d_v + 1
C2_FAIL_SHARE = 0.5
C2_MARGIN = 1e-8  # smallest relative singular value of [T,1] for the rank to count as full (generic)
C2_UNIQUE_SHARE_ALT, C2_MARGIN_ALT = 0.9, 1e-6  # the robustness alternatives


AT_DV2, AT_DV1, BETWEEN = "at d_v + 2", "at d_v + 1", "between"  # a model's threshold under C2's rule


def threshold_state(share: float, alternatives_at_dv2: bool, unique_needed: float = C2_UNIQUE_SHARE) -> str:
    """C2's decision for one model's heads, the exact example aside: ``AT_DV1`` (the paper's threshold) when
    fewer than ``C2_FAIL_SHARE`` of its (head, input) pairs are unique at d_s = d_v + 1, ``AT_DV2`` (the
    review's) when at least ``unique_needed`` are and every head admits alternatives at d_s = d_v + 2,
    ``BETWEEN`` otherwise. C19 applies it to each model of the family."""
    if share < C2_FAIL_SHARE:
        return AT_DV1
    return AT_DV2 if share >= unique_needed and alternatives_at_dv2 else BETWEEN


def _c2(
    exact_unique: bool,
    share: float,
    alternatives_at_dv2: bool,
    rule: str,
    unique_needed: float = C2_UNIQUE_SHARE,
    what: str = "real (head, input) pairs",
) -> Verdict:
    x = Interval.exact(share)
    note = "dimension count d_s - d_v - 1 = 0 at d_s = d_v + 1: uniqueness expected for a generic T"
    state = threshold_state(share, alternatives_at_dv2, unique_needed)
    if state == AT_DV1:
        return Verdict(
            "C2", FAILS, x.estimate, None, 1.0, note, rule, f"only {pct(share)} of {what} are unique at d_v + 1"
        )
    if exact_unique and state == AT_DV2:
        return Verdict(
            "C2",
            HOLDS,
            x.estimate,
            None,
            1.0,
            note,
            rule,
            f"the exact example and {pct(share)} of {what} are unique at d_s = d_v + 1, "
            "and every head admits alternatives at d_v + 2",
        )
    missing = [
        w
        for w, ok in (
            ("the exact example is not unique", exact_unique),
            (f"only {pct(share)} of {what} are unique", share >= unique_needed),
            ("not every head admits alternatives at d_v + 2", alternatives_at_dv2),
        )
        if not ok
    ]
    return Verdict("C2", PARTLY, x.estimate, None, 1.0, note, rule, "; ".join(missing))


def judge_c2(exact_unique: bool, margins: pd.DataFrame, alternatives_at_dv2: bool, rule: str) -> Verdict:
    """C2 (review), amended rule: at d_s = d_v + 1 a generic head admits no alternative, on every head and
    several inputs (``margins``: ``nullspace.threshold_margins`` rows of each input, with a ``text`` column),
    the rank counted full only above the margin ``C2_MARGIN``."""
    n_texts = int(margins.text.nunique()) if "text" in margins else 1
    what = f"(head, input) pairs ({n_texts} inputs)"
    share = unique_share(margins, C2_MARGIN)
    v = replace(_c2(exact_unique, share, alternatives_at_dv2, rule, what=what), estimate_of=C2_QUANTITY)
    alts = {
        "share": _c2(exact_unique, share, alternatives_at_dv2, rule, C2_UNIQUE_SHARE_ALT, what),
        "margin": _c2(exact_unique, unique_share(margins, C2_MARGIN_ALT), alternatives_at_dv2, rule, what=what),
    }
    return with_robustness(v, alts)


def judge_c2_original(exact_unique: bool, share_one_text: float, alternatives_at_dv2: bool, rule: str) -> Verdict:
    """C2's original rule as its first code applied it: the share of heads with rank([T,1]) = d_s on one
    input, with no margin checked."""
    v = _c2(exact_unique, share_one_text, alternatives_at_dv2, rule, what="real heads (one input, no margin)")
    return replace(v, estimate_of=replace(C2_QUANTITY, words="share of heads with full rank of [T,1] on one input"))


C3_FAILING_SHARE = 0.95  # share of the paper's constructed alternatives that must fail the exact test
C3_FAILING_SHARE_ALT = 0.9
C3_REALISABLE_TV = 1e-3  # a realisable alternative counts when its mean row TV from A exceeds this


def _lengths(ns: list[int]) -> str:
    return ", ".join(str(n) for n in ns) if ns else "none"


def _c3(
    real_passes: bool | None,
    failing_share: float,
    realisable_by_ds: dict[int, bool],
    rule: str,
    needed: float = C3_FAILING_SHARE,
) -> Verdict:
    note = (
        "none applies: the test is exact (a rank, not a sample), so there is no chance level; its control is "
        "the real A, which must pass it"
    )
    found = [n for n, ok in sorted(realisable_by_ds.items()) if ok]
    missing = [n for n, ok in sorted(realisable_by_ds.items()) if not ok]
    extra = (
        f"; softmax-realisable alternatives (mean row TV > {C3_REALISABLE_TV:g}) were found at d_s = {_lengths(found)}"
        + (f" and not found at d_s = {_lengths(missing)}" if missing else "")
        if realisable_by_ds
        else "; no length d_s >= d_v + 2 was searched for realisable alternatives"
    )
    if real_passes is None:
        why = "a causal mask leaves the entries above the diagonal free, so the exact test does not apply"
        return Verdict("C3", NOT_TESTABLE, None, None, None, note, rule, why + extra)
    if not real_passes:
        why = "the real attention fails the exact test, so the test cannot judge alternatives"
        return Verdict("C3", NOT_TESTABLE, failing_share, None, None, note, rule, why + extra)
    if failing_share >= needed:
        why = f"{pct(failing_share)} of the constructed alternatives are not realisable"
        return Verdict("C3", HOLDS, failing_share, None, None, note, rule, why + extra)
    verdict = FAILS if failing_share < 0.5 else PARTLY
    why = f"only {pct(failing_share)} of the constructed alternatives fail the test"
    return Verdict("C3", verdict, failing_share, None, None, note, rule, why + extra)


def judge_c3(real_passes: bool | None, failing_share: float, realisable_by_ds: dict[int, bool], rule: str) -> Verdict:
    """C3 (review): the paper's alternatives need not be softmax-realisable. ``real_passes`` is None where the
    exact test does not apply (a causal mask makes realisability a low-rank completion problem);
    ``realisable_by_ds``: each length d_s >= d_v + 2 searched -> whether a realisable alternative was found
    (reported in the sentence, not part of the verdict)."""
    v = replace(_c3(real_passes, failing_share, realisable_by_ds, rule), estimate_of=C3_QUANTITY)
    return with_robustness(v, {"share": _c3(real_passes, failing_share, realisable_by_ds, rule, C3_FAILING_SHARE_ALT)})


# --------------------------------------------------------------------------------------------------
# C15-C17 (post hoc: data/claims.csv): the count, realisable alternatives, this model's threshold
# --------------------------------------------------------------------------------------------------

C15_SHARE = 1.0  # the count must hold with equality in this share of (text, head) pairs: every one
C15_SHARE_ALT = 0.99  # robustness 'share'
C15_RANK_TOL_ALT = 1e-6  # robustness 'tolerance': a relative rank tolerance, as C1's
C15_COUNT = Quantity(
    "share of (text, head) pairs with dim LN(T) = max(0, d_s - d_v)", r"\Pr[\dim \mathrm{LN}(T) = \max(0, d_s - d_v)]"
)
C15_AUGMENTED = Quantity(
    "share of (text, head) pairs with dim LN([T,1]) = max(0, d_s - d_v - 1)",
    r"\Pr[\dim \mathrm{LN}([T,\mathbf 1]) = \max(0, d_s - d_v - 1)]",
)
C16_MIN_TV = 1e-3  # beyond d_v + 1 a realisable alternative counts when its mean row TV from A exceeds this
C16_NONE_TV = 1e-8  # at d_s <= d_v + 1 no realisable alternative may move rows by this much
C16_MIN_TV_ALT = 1e-2  # robustness 'tv'
C16_BEYOND = Quantity(
    "share of the searched lengths d_s >= d_v + 2 at which every searched head has a realisable alternative",
    r"\Pr_{d_s \ge d_v + 2}[\mathrm{TV}(A, A') > 10^{-3}]",
)
C16_AT_THRESHOLD = Quantity(
    "largest mean row TV of a realisable alternative at d_s <= d_v + 1", r"\max_{d_s \le d_v + 1} \mathrm{TV}(A, A')"
)
C16_COUNT = Quantity(
    "share of the measured (length, head) pairs whose local dimension is d_q(d_s - d_q - 1)",
    r"\Pr[\dim = d_q(d_s - d_q - 1)]",
)
C17_SHARE = 1.0  # each count must hold in this share of pairs: every one
C17_MARGIN = 1e-8  # smallest relative singular value of [T,1] for the rank to count as full
C17_SHARE_ALT, C17_MARGIN_ALT = 0.99, 1e-6  # robustness 'share' and 'margin'
C17_UNIQUE = Quantity(
    "share of (head, input) pairs at d_s = d_v + 1 with rank([T,1]) = d_s above the margin",
    r"\Pr[\operatorname{rank}\,[T,1] = d_s]",
)
C17_FULL = Quantity(
    "share of the survey's (text, head) pairs with rank(T) = min(d_s, d_v)",
    r"\Pr[\operatorname{rank} T = \min(d_s, d_v)]",
)


def _share_part(claim: str, name: str, share: float, needed: float, what: str, rule: str, q: Quantity) -> Verdict:
    """A part that holds when ``share`` (of an exact count) reaches ``needed``."""
    v = HOLDS if share >= needed else FAILS
    why = f"{pct(share)} of {what}" + ("" if v == HOLDS else f", below the {pct(needed)} the rule asks")
    return Verdict(f"{claim}.{name}", v, share, None, None, "", rule, why, threshold=needed, estimate_of=q)


def _part(claim: str, name: str, verdict: str, why: str, rule: str, estimate=None, threshold=None, q=None):
    return Verdict(f"{claim}.{name}", verdict, estimate, None, None, "", rule, why, threshold=threshold, estimate_of=q)


def _reason(parts: list[Verdict]) -> str:
    return "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts)


def _at_bound(table: pd.DataFrame, suffix: str, rtol: float | None) -> float:
    """Share of rows with dim LN at its bound (``suffix`` "T" or "T1"); with ``rtol`` a row whose smallest kept
    singular value is at or below it loses a rank, so its dimension leaves the bound."""
    ok = table[f"dim_LN_{suffix}"] == table[f"bound_{suffix}"]
    if rtol is not None:
        ok &= table[f"kept_min_{suffix}"] > rtol
    return float(ok.mean())


def judge_c15(
    table: pd.DataFrame, d_v: int, rule: str, *, share: float = C15_SHARE, rtol: float | None = None
) -> Verdict:
    """C15 (post hoc): dim LN(T) and dim LN([T,1]) meet their counts max(0, d_s - d_v) and max(0, d_s - d_v - 1)
    in at least ``share`` of the survey's (text, head) pairs; ``rtol``: another rank tolerance."""
    pairs = f"{len(table)} (text, head) pairs"
    count, augmented = _at_bound(table, "T", rtol), _at_bound(table, "T1", rtol)
    parts = [
        _share_part(
            "C15",
            "count",
            count,
            share,
            f"{pairs} have dim LN(T) = max(0, d_s - d_v) with d_v = {d_v}",
            rule,
            C15_COUNT,
        ),
        _share_part(
            "C15",
            "augmented",
            augmented,
            share,
            f"{pairs} have dim LN([T,1]) = max(0, d_s - d_v - 1)",
            rule,
            C15_AUGMENTED,
        ),
    ]
    note = "the rank-nullity bound dim LN(T) >= d_s - d_v, which no pair can fall below"
    v = combine_parts("C15", parts, rule, None, None, note, first_is_core=False)
    return replace(v, estimate=count, threshold=share, estimate_of=C15_COUNT)


def search_budget(steps: int) -> str:
    """The realisable search's budget in words (``nullspace.search_by_length``: one start per length and head)."""
    return (
        f"{steps} Adam step{'' if steps == 1 else 's'} (the chapter's search_steps) per searched length and "
        "head, from one start, the max-entropy alternative"
    )


def _beyond(accepted_tv_by_ds: dict[int, float], min_tv: float, steps: int | None, rule: str) -> Verdict:
    """C16's part beyond the threshold. A length where some head's search found no accepted alternative moving
    rows by more than ``min_tv``: version 1 (``steps`` None) counts it against the claim; version 2 reads it as
    unresolved (the search ran within its budget of ``steps`` Adam steps), so the part is not testable there."""
    found = [n for n, tv in sorted(accepted_tv_by_ds.items()) if tv > min_tv]
    missing = [n for n in sorted(accepted_tv_by_ds) if n not in found]
    share = len(found) / len(accepted_tv_by_ds)
    why = f"every searched head has one with mean row TV > {min_tv:g} at d_s = {_lengths(found)}" + (
        f", not at d_s = {_lengths(missing)}" if missing else ""
    )
    v = HOLDS if not missing else FAILS if steps is None else NOT_TESTABLE
    if v == NOT_TESTABLE:
        why = (
            f"unresolved at d_s = {_lengths(missing)}: some searched head's search found no alternative that the "
            f"exact test accepts with mean row TV > {min_tv:g} within its budget, {search_budget(steps)}"
            + (f"; every searched head has one at d_s = {_lengths(found)}" if found else "")
        )
    return _part("C16", "beyond the threshold", v, why, rule, share, 1.0, C16_BEYOND)


def _threshold_and_count(
    threshold_tv_by_ds: dict[int, float], dimensions: tuple[tuple[int, int, int], ...], rule: str
) -> list[Verdict]:
    """C16's parts at the threshold and of the count, the same under both versions of its rule."""
    if threshold_tv_by_ds:
        largest = max(threshold_tv_by_ds.values())
        why = f"the largest mean row TV at d_s = {_lengths(sorted(threshold_tv_by_ds))} is {fmt(largest)}"
        v = HOLDS if largest < C16_NONE_TV else FAILS
        at_threshold = _part("C16", "at the threshold", v, why, rule, largest, C16_NONE_TV, C16_AT_THRESHOLD)
    else:
        at_threshold = _part("C16", "at the threshold", NOT_TESTABLE, "no length d_s <= d_v + 1 was searched", rule)
    if dimensions:
        off = sorted({n for n, measured, expected in dimensions if measured != expected})
        same = sum(measured == expected for _, measured, expected in dimensions) / len(dimensions)
        checked = _lengths(sorted({n for n, _, _ in dimensions}))
        why = f"measured at d_s = {checked}" + (
            f"; it differs at d_s = {_lengths(off)}" if off else ", equal everywhere"
        )
        count = _part("C16", "count", FAILS if off else HOLDS, why, rule, same, 1.0, C16_COUNT)
    else:
        count = _part("C16", "count", NOT_TESTABLE, "no local solution dimension was measured", rule)
    return [at_threshold, count]


def _c16(
    measured: tuple[dict[int, float], dict[int, float], tuple[tuple[int, int, int], ...]],
    rule: str,
    min_tv: float,
    steps: int | None,
) -> Verdict:
    """C16 from ``measured`` (accepted moves beyond the threshold, moves at it, local dimensions): version 2
    with the search's ``steps``, version 1 with None (see :func:`_beyond`)."""
    accepted_tv_by_ds, threshold_tv_by_ds, dimensions = measured
    note = "the dimension count d_q(d_s - d_q - 1) of realisable alternatives, 0 at d_s = d_q + 1"
    if not accepted_tv_by_ds:
        why = "no length d_s >= d_v + 2 was searched for realisable alternatives"
        return Verdict("C16", NOT_TESTABLE, None, None, None, note, rule, why, estimate_of=C16_BEYOND)
    beyond = _beyond(accepted_tv_by_ds, min_tv, steps, rule)
    parts = [beyond, *_threshold_and_count(threshold_tv_by_ds, dimensions, rule)]
    v = HOLDS if all(p.verdict == HOLDS for p in parts) else PARTLY
    if beyond.verdict == NOT_TESTABLE:
        v = NOT_TESTABLE
    elif steps is None and beyond.estimate == 0:
        v = FAILS  # version 1: found at no searched length
    return Verdict(
        "C16", v, beyond.estimate, None, None, note, rule, _reason(parts), tuple(parts), 1.0, estimate_of=C16_BEYOND
    )


def judge_c16(
    accepted_tv_by_ds: dict[int, float],
    threshold_tv_by_ds: dict[int, float],
    dimensions: tuple[tuple[int, int, int], ...],
    rule: str,
    *,
    steps: int,
    min_tv: float = C16_MIN_TV,
) -> Verdict:
    """C16 (post hoc), amended rule: realisable alternatives moving rows by more than ``min_tv`` at every
    searched d_s >= d_v + 2, none moving them by C16_NONE_TV at d_s <= d_v + 1, and the measured local
    dimension equal to the count d_q(d_s - d_q - 1). A searched length where the search (``steps`` Adam steps)
    found nothing is unresolved: the claim is then not testable, as with no length d_s >= d_v + 2 searched.
    Holds if all three parts hold, partly holds otherwise."""
    return _c16((accepted_tv_by_ds, threshold_tv_by_ds, dimensions), rule, min_tv, steps)


def judge_c16_original(
    accepted_tv_by_ds: dict[int, float],
    threshold_tv_by_ds: dict[int, float],
    dimensions: tuple[tuple[int, int, int], ...],
    rule: str,
) -> Verdict:
    """C16's original rule: as :func:`judge_c16`, but a searched length where the search found nothing counts
    against the claim (partly holds; fails if the search found an alternative at no searched length)."""
    return _c16((accepted_tv_by_ds, threshold_tv_by_ds, dimensions), rule, C16_MIN_TV, None)


def judge_c17(
    margins: pd.DataFrame,
    alternatives_at_dv2: bool | None,
    rank_full_share: float,
    rule: str,
    *,
    share: float = C17_SHARE,
    margin: float = C17_MARGIN,
) -> Verdict:
    """C17 (post hoc): for this model the threshold is d_v + 2 in every head: at least ``share`` of the
    (head, input) pairs at d_s = d_v + 1 unique (rank([T,1]) = d_s above ``margin``), every head with
    alternatives at d_v + 2, and rank(T) full in at least ``share`` of the survey's pairs. Holds if all three
    parts hold, fails if none holds, partly holds otherwise."""
    n_inputs = int(margins.text.nunique()) if "text" in margins else 1
    unique = unique_share(margins, margin)
    pairs = f"(head, input) pairs at d_s = d_v + 1 ({n_inputs} inputs) are unique above a margin of {fmt(margin)}"
    # parts are named in words: a page typesets d_v, so a name holding it would not read as it is written
    past = "alternatives one token past the threshold"
    if alternatives_at_dv2 is None:
        dv2 = _part("C17", past, NOT_TESTABLE, "no text of d_v + 2 tokens was surveyed", rule)
    elif alternatives_at_dv2:
        dv2 = _part("C17", past, HOLDS, "every head has dim LN([T,1]) >= 1 at d_s = d_v + 2", rule)
    else:
        dv2 = _part("C17", past, FAILS, "some head has no alternative at d_s = d_v + 2", rule)
    parts = [
        _share_part("C17", "unique at the threshold", unique, share, pairs, rule, C17_UNIQUE),
        dv2,
        _share_part(
            "C17",
            "full rank",
            rank_full_share,
            share,
            "the survey's pairs have rank(T) = min(d_s, d_v)",
            rule,
            C17_FULL,
        ),
    ]
    verdicts = [p.verdict for p in parts]
    v = HOLDS if all(x == HOLDS for x in verdicts) else FAILS if HOLDS not in verdicts else PARTLY
    note = "the generic count d_s - d_v - 1 (0 at d_s = d_v + 1)"
    return Verdict(
        "C17", v, unique, None, None, note, rule, _reason(parts), tuple(parts), share, estimate_of=C17_UNIQUE
    )


# --------------------------------------------------------------------------------------------------
# the entry points: one per claim, called by ``Chapter.judge``
# --------------------------------------------------------------------------------------------------


def c1(evidence: C1Evidence, rules: Rules) -> Verdict:
    """C1 under the amended rule, with the alternative ``tolerance``, and the original rule's verdict."""
    e = evidence
    return amended(judge_c1(e.table, e.d_v, rules.rule), judge_c1_original(e.table, e.d_v, rules.pre_registered))


def c2(evidence: C2Evidence, rules: Rules) -> Verdict:
    """C2 under the amended rule, with the alternatives ``share`` and ``margin``, and the original rule's verdict."""
    e = evidence
    original = judge_c2_original(e.exact_unique, e.share_one_text, e.alternatives_at_dv2, rules.pre_registered)
    return amended(judge_c2(e.exact_unique, e.margins, e.alternatives_at_dv2, rules.rule), original)


def c3(evidence: C3Evidence, rules: Rules) -> Verdict:
    """C3 under its rule, with the alternative ``share``; the lengths where a realisable alternative moving
    rows by a mean TV above ``C3_REALISABLE_TV`` was found are reported in the reason."""
    found = {n: tv > C3_REALISABLE_TV for n, tv in evidence.accepted_tv_by_ds.items()}
    return judge_c3(evidence.real_passes, evidence.failing_share, found, rules.rule)


def c15(evidence: C15Evidence, rules: Rules) -> Verdict:
    """C15 under its rule, with the alternatives ``share`` and ``tolerance``."""
    e, rule = evidence, rules.rule
    alternatives = {
        "share": judge_c15(e.table, e.d_v, rule, share=C15_SHARE_ALT),
        "tolerance": judge_c15(e.table, e.d_v, rule, rtol=C15_RANK_TOL_ALT),
    }
    return with_robustness(judge_c15(e.table, e.d_v, rule), alternatives)


def c16(evidence: C16Evidence, rules: Rules) -> Verdict:
    """C16 under the amended rule, with the alternative ``tv``, and the original rule's verdict."""
    e, rule = evidence, rules.rule
    measured = (e.accepted_tv_by_ds, e.threshold_tv_by_ds, e.dimensions)
    v = judge_c16(*measured, rule, steps=e.search_steps)
    tv = judge_c16(*measured, rule, steps=e.search_steps, min_tv=C16_MIN_TV_ALT)
    return amended(with_robustness(v, {"tv": tv}), judge_c16_original(*measured, rules.pre_registered))


def c17(evidence: C17Evidence, rules: Rules) -> Verdict:
    """C17 under its rule, with the alternatives ``share`` and ``margin``."""
    e, rule = evidence, rules.rule
    v = judge_c17(e.margins, e.alternatives_at_dv2, e.rank_full_share, rule)
    alternatives = {
        "share": judge_c17(e.margins, e.alternatives_at_dv2, e.rank_full_share, rule, share=C17_SHARE_ALT),
        "margin": judge_c17(e.margins, e.alternatives_at_dv2, e.rank_full_share, rule, margin=C17_MARGIN_ALT),
    }
    return with_robustness(v, alternatives)
