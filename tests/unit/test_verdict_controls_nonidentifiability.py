"""C1-C3 and C15-C17 on controls whose truth is known by construction, through the computation chapter 2 uses
(``nullspace.null_space_table``, ``threshold_margins``, ``search_by_length``, the exact realisability test, the
study's evidence builders) and the judges."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from identifiability import nullspace as ns
from identifiability.verdicts import FAILS, HOLDS, NOT_TESTABLE, PARTLY
from identifiability.verdicts import nonidentifiability as vd

R = "the rule"
D_V, D = 4, 12  # value width, model width


def _values(
    d_s: int, seed: int, repeat_rows: bool = False, near_singular: float = 0.0, constant_column: bool = False
) -> torch.Tensor:
    """(1, 2, d_s, d_v) value vectors of two heads: generic (random), with two equal rows (rank-deficient
    [T, 1], so an alternative exists one token earlier), generic plus a row that nearly repeats another, or
    with a constant first column (the ones vector in col(T): [T, 1] no larger than T)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(1, 2, d_s, D_V, generator=g, dtype=torch.float64)
    if repeat_rows:
        v[..., 1, :] = v[..., 0, :]
    if near_singular:
        v[..., 1, :] = v[..., 0, :] + near_singular * torch.randn(D_V, generator=g, dtype=torch.float64)
    if constant_column:
        v[..., 0] = 1.0
    return v


W_O = torch.randn(1, 2, D_V, D, generator=torch.Generator().manual_seed(99), dtype=torch.float64)


def _survey(lengths, **kw) -> pd.DataFrame:
    traces = [SimpleNamespace(values=_values(n, seed=n, **kw), n_tokens=n) for n in lengths]
    return ns.null_space_table(traces, W_O, progress=False)


def test_c1_generic_heads_partly_hold_and_repeated_rows_make_it_hold():
    lengths = [D_V - 1, D_V, D_V + 1, D_V + 2, D_V + 5]
    generic = vd.judge_c1(_survey(lengths), D_V, R)
    assert generic.verdict == PARTLY and generic.estimate == D_V + 2  # unique at d_v + 1, as the review says
    # two equal rows of V: [T, 1] loses a rank, so an alternative exists from d_v + 1 on
    assert vd.judge_c1(_survey(lengths, repeat_rows=True), D_V, R).verdict == HOLDS
    assert dict(generic.robustness) == {"tolerance": PARTLY}


def test_c1_fails_only_on_a_count_linear_algebra_cannot_produce():
    # rank([T, 1]) <= d_v + 1 < d_s beyond d_v + 1, so a real survey cannot fail C1: the negative control is a
    # table that claims a head without alternatives at d_v + 2
    table = _survey([D_V + 2])
    assert (table.dim_LN_T1 >= 1).all()
    assert vd.judge_c1(table.assign(dim_LN_T1=0), D_V, R).verdict == FAILS
    assert vd.judge_c1(_survey([D_V - 1, D_V]), D_V, R).verdict == NOT_TESTABLE


def test_c1_is_not_testable_where_the_survey_lacks_a_decisive_length_and_names_it():
    """Amended rule (version 2): without an input of d_v + 1 tokens (or of d_v + 2) the threshold is not
    placed, so the claim is not testable, the missing length named; the original rule read that absence as
    agreement, and its verdict is kept beside."""
    from identifiability.evidence.nonidentifiability import C1Evidence
    from identifiability.verdicts.claims import rules

    # repeated rows: every head admits alternatives at every length past d_v, so only the lengths decide
    without = C1Evidence(_survey([D_V - 1, D_V, D_V + 2, D_V + 5], repeat_rows=True), D_V)
    v = vd.c1(without, rules("C1"))
    assert v.verdict == NOT_TESTABLE and f"d_s = d_v + 1 = {D_V + 1} tokens" in v.reason
    assert f"d_v + 2 = {D_V + 2}" not in v.reason and dict(v.robustness) == {"tolerance": NOT_TESTABLE}
    assert v.original.verdict == HOLDS and v.original.rule == rules("C1").original  # version 1's reading
    no_dv2 = vd.c1(C1Evidence(_survey([D_V + 1, D_V + 5], repeat_rows=True), D_V), rules("C1"))
    assert no_dv2.verdict == NOT_TESTABLE and f"d_s = d_v + 2 = {D_V + 2} tokens" in no_dv2.reason
    both = vd.c1(C1Evidence(_survey([D_V - 1, D_V, D_V + 1, D_V + 2, D_V + 5], repeat_rows=True), D_V), rules("C1"))
    assert both.verdict == HOLDS and both.original.verdict == HOLDS and dict(both.robustness) == {"tolerance": HOLDS}


def test_c1_fails_on_a_failing_head_at_d_v_plus_2_even_without_d_v_plus_1():
    from identifiability.evidence.nonidentifiability import C1Evidence
    from identifiability.verdicts.claims import rules

    table = _survey([D_V, D_V + 2, D_V + 5])
    failing = table.assign(dim_LN_T1=table.dim_LN_T1.where(table.d_s != D_V + 2, 0))  # no head alternatives there
    v = vd.c1(C1Evidence(failing, D_V), rules("C1"))
    assert v.verdict == FAILS and f"some head at d_s = {D_V + 2}" in v.reason and v.original.verdict == FAILS


def _margins(n_inputs: int, **kw) -> pd.DataFrame:
    return pd.concat(
        [ns.threshold_margins(_values(D_V + 1, seed=s, **kw), W_O).assign(text=s) for s in range(n_inputs)],
        ignore_index=True,
    )


def test_c2_holds_on_generic_heads_and_fails_when_rows_repeat():
    v = vd.judge_c2(True, _margins(3), True, R)
    assert v.verdict == HOLDS and v.estimate == 1.0 and "3 inputs" in v.reason
    assert vd.judge_c2(True, _margins(3, repeat_rows=True), True, R).verdict == FAILS


def test_c2_is_partly_when_some_inputs_are_degenerate():
    mixed = pd.concat([_margins(2), _margins(1, repeat_rows=True).assign(text=2)], ignore_index=True)
    v = vd.judge_c2(True, mixed, True, R)
    assert v.verdict == PARTLY and v.estimate == pytest.approx(2 / 3) and "only 66.7%" in v.reason
    assert vd.judge_c2(False, _margins(3), True, R).verdict == PARTLY  # the exact example must agree


def test_c2_the_margin_catches_a_nearly_singular_t_that_rank_alone_passes():
    near = _margins(3, near_singular=1e-11)
    assert (near.rank_T1 == near.d_s).all()  # full rank by the rank tolerance...
    assert vd.judge_c2_original(True, ns.unique_share(near, margin=None), True, R).verdict == HOLDS
    assert vd.judge_c2(True, near, True, R).verdict == FAILS  # ...but not above the margin
    assert dict(vd.judge_c2(True, _margins(3), True, R).robustness) == {"share": HOLDS, "margin": HOLDS}


def _softmax_of_rank(d_s: int, d_q: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(d_s, d_q, generator=g, dtype=torch.float64) for _ in range(2))
    return torch.softmax(q @ k.T, dim=-1)


@pytest.mark.parametrize("d_q", [2, 3])
def test_c3_holds_when_the_alternatives_fail_the_exact_test_and_fails_when_they_pass(d_q):
    d_s = 8
    a = _softmax_of_rank(d_s, d_q, 0)
    assert ns.realisability(a, d_q).realisable  # the control: a real softmax attention passes
    # alternatives built from A by a generic perturbation of its weights (the paper's construction adds a null
    # direction; any generic change of A leaves the rank-d_q log manifold)
    g = torch.Generator().manual_seed(1)
    moved = [a + 1e-3 * (p := torch.rand(d_s, d_s, generator=g, dtype=torch.float64)) - 1e-3 * p.mean(1, keepdim=True)]
    failing = sum(not ns.realisability(m, d_q).realisable for m in moved) / len(moved)
    assert vd.judge_c3(True, failing, {d_s: True}, R).verdict == HOLDS
    # alternatives that are themselves softmax(QK^T) of rank d_q pass the test: the objection fails
    realisable = [_softmax_of_rank(d_s, d_q, s) for s in (2, 3)]
    failing = sum(not ns.realisability(m, d_q).realisable for m in realisable) / len(realisable)
    v = vd.judge_c3(True, failing, {d_s: True, d_s + 2: False}, R)
    assert v.verdict == FAILS and "found at d_s = 8 and not found at d_s = 10" in v.reason


def test_the_entry_points_judge_the_evidence_under_the_claims_rules():
    """``c1`` to ``c3`` (what ``ch.judge`` calls): the judges above under the claims table's rules, C2 with its
    original rule's verdict, C3 reporting the lengths whose realisable alternative moves rows by more than
    C3_REALISABLE_TV."""
    from identifiability.evidence.nonidentifiability import C1Evidence, C2Evidence, C3Evidence
    from identifiability.verdicts import Rules
    from identifiability.verdicts.claims import rules

    v1 = vd.c1(C1Evidence(_survey([D_V + 1, D_V + 2]), D_V), rules("C1"))
    assert v1.verdict == PARTLY and v1.rule == rules("C1").rule and dict(v1.robustness) == {"tolerance": PARTLY}
    e2 = C2Evidence(True, _margins(3), True, 1.0)
    v2 = vd.c2(e2, rules("C2"))
    assert v2.verdict == HOLDS and v2.original.verdict == HOLDS and v2.original.rule == rules("C2").original
    with pytest.raises(ValueError, match="amended"):
        vd.c2(e2, Rules(rules("C2").rule))  # an amended claim is judged under its original rule too
    v3 = vd.c3(C3Evidence(True, 1.0, {8: 0.2, 10: vd.C3_REALISABLE_TV / 2}), rules("C3"))
    assert v3.verdict == HOLDS and "found at d_s = 8 and not found at d_s = 10" in v3.reason


# --- C15-C17 (post hoc) -----------------------------------------------------------------------------------------

LENGTHS = [D_V - 1, D_V, D_V + 1, D_V + 2, D_V + 5]


def test_c15_holds_on_generic_heads_and_fails_or_partly_holds_where_the_count_is_not_met():
    from identifiability.evidence.nonidentifiability import C15Evidence
    from identifiability.verdicts.claims import rules

    generic = vd.c15(C15Evidence(_survey(LENGTHS), D_V), rules("C15"))
    assert generic.verdict == HOLDS and generic.estimate == 1.0
    assert dict(generic.robustness) == {"share": HOLDS, "tolerance": HOLDS}
    # two equal rows: below d_v, T loses a rank (dim LN(T) above the count) and [T, 1] too
    repeated = vd.c15(C15Evidence(_survey(LENGTHS, repeat_rows=True), D_V), rules("C15"))
    assert repeated.verdict == FAILS and [p.verdict for p in repeated.parts] == [FAILS, FAILS]
    # a constant column puts the ones vector in col(T): T meets its count, [T, 1] does not beyond d_v
    ones = vd.c15(C15Evidence(_survey(LENGTHS, constant_column=True), D_V), rules("C15"))
    assert ones.verdict == PARTLY and [p.verdict for p in ones.parts] == [HOLDS, FAILS]


def test_c15_tolerance_alternative_catches_a_nearly_repeated_row():
    from identifiability.evidence.nonidentifiability import C15Evidence
    from identifiability.verdicts.claims import rules

    near = _survey([D_V - 1, D_V], near_singular=1e-9)  # full rank by the book's tolerance, not by 1e-6
    v = vd.c15(C15Evidence(near, D_V), rules("C15"))
    assert v.verdict == HOLDS and dict(v.robustness)["tolerance"] == FAILS


def _search(lengths, attention, steps: int, jacobian: int = 0) -> pd.DataFrame:
    """``nullspace.search_by_length`` on heads of synthetic values with ``attention(d_s, seed)`` as A."""
    traces = [
        SimpleNamespace(
            values=_values(n, seed=n), attentions=attention(n, n)[None, None].expand(1, 2, n, n), n_tokens=n
        )
        for n in lengths
    ]
    return ns.search_by_length(traces, W_O, [(1, 0)], D_V, steps=steps, jacobian_max_length=jacobian, progress=False)[0]


def test_c16_holds_where_realisable_alternatives_exist_and_is_not_testable_where_the_search_finds_none():
    """A realisable A (a softmax of rank-d_q logits): alternatives found beyond d_v + 1, none at it, their
    dimension the count. A uniform A is its own maximum-entropy point: with no search step nothing moves, so
    every length beyond the threshold is unresolved within the search's budget and the amended rule (version
    2) finds the claim not testable there, naming the lengths and the budget; version 1 read that as failing,
    and its verdict is kept beside."""
    from identifiability.studies import nonidentifiability as study
    from identifiability.verdicts.claims import rules

    lengths = [D_V + 1, D_V + 2, D_V + 4]
    real = study.c16_evidence(_search(lengths, lambda n, s: _softmax_of_rank(n, D_V, s), 2, D_V + 2), D_V, 2)
    v = vd.c16(real, rules("C16"))
    assert v.verdict == HOLDS, v.reason
    assert [p.verdict for p in v.parts] == [HOLDS, HOLDS, HOLDS] and real.dimensions == ((5, 0, 0), (6, 4, 4))
    assert v.original.verdict == HOLDS and v.original.rule == rules("C16").original
    uniform = study.c16_evidence(
        _search(lengths, lambda n, s: torch.full((n, n), 1 / n, dtype=torch.float64), 0), D_V, 0
    )
    none = vd.c16(uniform, rules("C16"))
    assert max(uniform.accepted_tv_by_ds.values()) < 1e-8 and none.verdict == NOT_TESTABLE
    assert "unresolved at d_s = 6, 8" in none.reason and "0 Adam steps" in none.reason
    assert dict(none.robustness) == {"tv": NOT_TESTABLE} and none.original.verdict == FAILS
    assert "not at d_s = 6, 8" in none.original.reason
    # nothing beyond the threshold searched: nothing to judge
    below = study.c16_evidence(_search([D_V + 1], lambda n, s: _softmax_of_rank(n, D_V, s), 1), D_V, 1)
    assert vd.c16(below, rules("C16")).verdict == NOT_TESTABLE


def test_c16_one_unresolved_length_makes_it_not_testable_where_version_1_partly_held():
    """Found at d_v + 4, nothing at d_v + 2 = the confirmation run's shape (lee_test, d_s = 34)."""
    from identifiability.evidence.nonidentifiability import C16Evidence
    from identifiability.verdicts.claims import rules

    e = C16Evidence({D_V + 2: 0.0, D_V + 4: 0.2}, {D_V + 1: 1e-15}, ((D_V + 2, D_V, D_V),), 30)
    v = vd.c16(e, rules("C16"))
    assert v.verdict == NOT_TESTABLE and v.parts[0].verdict == NOT_TESTABLE and v.estimate == 0.5
    assert f"unresolved at d_s = {D_V + 2}" in v.reason and "30 Adam steps" in v.reason
    assert f"every searched head has one at d_s = {D_V + 4}" in v.reason
    assert v.original.verdict == PARTLY


def test_c16_at_the_threshold_part_fails_on_a_move_the_exact_count_forbids():
    # at d_s <= d_v + 1 a realisable alternative cannot move (Section 3): the negative control is evidence that
    # claims one did
    v = vd.judge_c16({D_V + 2: 0.1}, {D_V + 1: 0.01}, ((D_V + 2, D_V, D_V),), R, steps=30)
    assert v.verdict == PARTLY and [p.verdict for p in v.parts] == [HOLDS, FAILS, HOLDS]


def test_c17_holds_on_generic_heads_and_not_where_rows_repeat():
    from identifiability.studies import nonidentifiability as study
    from identifiability.verdicts.claims import rules

    def evidence(lengths, **kw):
        survey = SimpleNamespace(table=_survey(lengths, **kw), d_v=D_V)
        return study.c17_evidence(SimpleNamespace(table=_margins(3, **kw)), survey)

    v = vd.c17(evidence(LENGTHS), rules("C17"))
    assert v.verdict == HOLDS and v.estimate == 1.0 and dict(v.robustness) == {"share": HOLDS, "margin": HOLDS}
    # repeated rows: not unique at d_v + 1, T rank-deficient below d_v; alternatives at d_v + 2 still (rank-nullity)
    repeated = vd.c17(evidence(LENGTHS, repeat_rows=True), rules("C17"))
    assert repeated.verdict == PARTLY and [p.verdict for p in repeated.parts] == [FAILS, HOLDS, FAILS]
    # ... and no text of d_v + 2 tokens surveyed: no part holds
    short = vd.c17(evidence([D_V - 1, D_V, D_V + 1], repeat_rows=True), rules("C17"))
    assert short.verdict == FAILS and short.parts[1].verdict == NOT_TESTABLE
