"""Chapter 2's words (identifiability.text.nonidentifiability): each wording, from numbers on each side of
the branch that chooses it. The texts state numbers; whether a claim holds is said by its verdict only."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest
import sympy as sp

from identifiability.text import nonidentifiability as prose
from identifiability.verdicts.nonidentifiability import C3_REALISABLE_TV

from .test_text import stand_ins_match


def _survey(**kw) -> NS:
    base = dict(
        survey_texts=3,
        survey_min_ds=8,
        survey_max_ds=48,
        heads_per_text=72,
        survey_heads=216,
        share_rank_T_full=1.0,
        share_LN_T_at_bound=1.0,
        share_LN_T1_at_bound=1.0,
        rank_nullity_violations=0,
        rtol=1e-13,
        gap_T_kept_min=1e-3,
        gap_T1_kept_min=2e-3,
        gap_T_dropped_max=3e-16,
        d_v=32,
        alternatives_at_dv2=True,
    )
    return NS(**(base | kw))


def _check(tv_mean: float, tv_max: float = 0.5, error: float = 1e-14) -> dict:
    return {
        "row_sum_max_error": 1e-15,
        "min_entry": 1e-9,
        "rel_output_error": error,
        "tv_mean": tv_mean,
        "tv_max": tv_max,
    }


def _alternatives(construct_tv: float = 0.01, lp_tv: float = 0.2, verified: bool = True) -> NS:
    return NS(
        construct=_check(construct_tv),
        lp=_check(lp_tv),
        construct_verified=True,
        lp_verified=verified,
        example_ds=40,
        example_layer=2,
        example_head=3,
        example_dim_LN_T1=7,
    )


def _heads() -> NS:
    return NS(
        table=pd.DataFrame({"lp_tv_max": [0.25, 0.75]}),
        per_layer_table=pd.DataFrame({"lp_tv_mean": [0.12345]}, index=pd.Index([1], name="layer")),
        survey_lp_error_max=1e-13,
        survey_me_error_max=2e-13,
        survey_lp_tv_mean=0.3,
        survey_me_tv_mean=0.1,
        survey_paper_realisable_share=0.25,
    )


def _threshold(move: float = 1e-12, me_move: float | None = None, unique_share: float = 1.0) -> NS:
    return NS(
        threshold_ds=33,
        threshold_inputs=4,
        threshold_unique_heads=288,
        threshold_heads=288,
        threshold_sigma_min=1e-4,
        threshold_ones_min=0.01,
        layer=2,
        head=1,
        threshold_lp_tv_max=move,
        threshold_me_tv_max=move / 2 if me_move is None else me_move,
        unique_share=unique_share,
    )


def _tests(causal: bool = False, real_realisable: bool = True, paper_realisable: bool = False) -> NS:
    return NS(
        causal=causal,
        tests={"A (real)": NS(rank=30, realisable=real_realisable)},
        d_q=32,
        d_s=40,
        realisable_rank={"A (real)": 30, "full step": 39, "half step": 38, "max-entropy alternative": 32},
        realisable={
            "A (real)": True,
            "full step": paper_realisable,
            "half step": False,
            "max-entropy alternative": True,
        },
    )


SEARCH = list(prose.SEARCH_COLUMNS)


def _rows(*rows: tuple[int, float, float]) -> pd.DataFrame:
    """The search's table, one row per (d_s, measured dimension, counted dimension); NaN: not measured."""
    base = {c: 0.5 for c in SEARCH} | {"layer": 2, "head": 1, "search_rank": float("nan")}
    return pd.DataFrame([base | {"d_s": n, "local_dim": m, "expected_dim": e} for n, m, e in rows])


def _by_length(*lengths: int) -> pd.DataFrame:
    tv = {33: (1e-9, 1e-9, 0.0), 34: (2e-3, 0.01, 0.05), 40: (0.1234, 0.5678, 0.3)}
    return pd.DataFrame(
        [dict(zip(["d_s", "search_tv_mean", "search_tv_max", "lp_tv_mean"], (n, *tv[n]))) for n in lengths]
    )


def _search(**kw) -> NS:
    """d_v = d_q = 32: d_s = 33 is the threshold, 34 and 40 lie beyond it."""
    base = dict(
        table=_rows((33, 0, 0), (34, 32, 32), (40, float("nan"), 224)),
        by_length=_by_length(33, 34, 40),
        beyond_runs=2,
        realisable_by_ds={34: True, 40: True},
        search_max_tv_mean=0.1234,
        search_max_tv_row=0.5678,
        search_error_max=1e-12,
        search_rank_max=32,
        realisable_none_at_threshold=True,
        dimension_count_confirmed=True,
        search_min_prob=1e-9,
        A_min_prob=1e-3,
        d_v=32,
        d_q=32,
        causal=False,
    )
    return NS(**(base | kw))


def test_causal_note_names_the_family():
    assert prose.causal_note("gpt2").startswith("*gpt2 is causal: row $i$ of $A$ is zero beyond key $i$")


def test_survey_text_states_the_gap_or_that_no_text_was_long_enough():
    gap = prose.survey_text(_survey())
    assert "**3 texts** ($d_s$ = 8–48) × 72 heads = 216 matrices $T$" in gap
    assert "the largest one not counted" in gap and "was 3.0e-16: float64 rounding" in gap
    short = prose.survey_text(_survey(gap_T_dropped_max=math.inf))
    assert "no text was longer than $d_v$, so nothing fell below the tolerance." in short
    assert "the largest one not counted" not in short


def test_checks_table_names_its_columns_in_words():
    html = prose.checks_table(_alternatives()).to_html()
    assert "largest row-sum error" in html and "mean TV per row" in html and "paper's construction" in html
    assert "1.0e-15" in html and "0.0100" in html


def test_excerpt_marks_a_cut():
    assert prose.excerpt("a" * 10, 5) == "aaaaa…"
    assert prose.excerpt("a" * 5, 5) == "aaaaa"


@pytest.mark.parametrize(
    ("lp_tv", "words"),
    [(0.2, "move rows much further: 0.200"), (0.05, "move rows further: 0.050"), (0.01, "move rows no further")],
)
def test_alternatives_text_compares_the_lp_with_the_random_direction(lp_tv, words):
    text = prose.alternatives_text(_alternatives(construct_tv=0.01, lp_tv=lp_tv))
    assert words in text and "(within the required $10^{-10}$)" in text


def test_alternatives_text_says_when_an_alternative_is_not_verified():
    assert "(**not** within the required $10^{-10}$)" in prose.alternatives_text(_alternatives(verified=False))


def test_head_distances_text_tables_the_layers_and_states_the_means():
    text = prose.head_distances_text(_heads())
    assert "0.123" in text.split("\n\n")[0]  # the per-layer table, rounded
    assert "Across all 2 heads" in text and "to a relative 2.0e-13" in text and "(largest single row 0.750)" in text


def _exact(unique: bool) -> NS:
    m = sp.Matrix([[1, 0], [0, 1], [1, 1]])
    generic = dict(T=m, rank_T=2, LN_T=[[1, 1, -1]], x_dot_1=[1], dim_LN_T1=0, solution=sp.eye(3), free_parameters=0)
    deficient = dict(T=m, rank_T=1, dim_LN_T1=1, solution=sp.eye(3), free_parameters=3)
    return NS(
        exact_generic_unique=unique,
        examples={"A": sp.eye(3), "generic": generic | {"unique": unique}, "deficient": deficient},
    )


def test_exact_threshold_text_says_whether_the_generic_solution_is_unique():
    assert "**only A itself**" in prose.exact_threshold_text(_exact(True))
    assert "**not unique**" in prose.exact_threshold_text(_exact(False))
    assert "with 0 free parameters" in prose.exact_threshold_text(_exact(True))


def test_threshold_text_reads_the_move_and_names_claim_c17():
    text = prose.threshold_text(_threshold(move=1e-12), _survey(share_rank_T_full=0.99))
    assert "in **288 of 288 (input, head) pairs** rank$([T,1]) = d_s$" in text and "(rank tolerance 1e-13)" in text
    assert "the LP's largest move is 1.0e-12 and the max-entropy alternative's 5.0e-13" in text
    assert "in total variation: zero up to rounding.\n\n" in text and "**not** zero" not in text
    assert "rank$(T) = \\min(d_s, d_v)$ held for 99.00% of heads" in text
    assert text.endswith(
        "Where this model's threshold lies, for every head, is claim C17, judged at the end of the "
        "chapter from these counts."
    )
    assert "the threshold is $" not in text
    below = prose.NONE_TV / 2
    for moved in (_threshold(move=2 * prose.NONE_TV), _threshold(move=below, me_move=2 * prose.NONE_TV)):
        text = prose.threshold_text(moved, _survey())
        assert "in total variation: **not** zero.\n\n" in text and "zero up to rounding" not in text
    assert "zero up to rounding" in prose.threshold_text(_threshold(move=below, me_move=below), _survey())


def test_exact_tests_text_states_the_real_rank_against_d_q():
    assert prose.exact_tests_text(_tests(causal=True), _heads()) == ""
    text = prose.exact_tests_text(_tests(), _heads())
    assert "rank 30 (at most $d_q = 32$)" in text and "39 (full step), 38 (half step)" in text
    assert "max-entropy" not in text and "25% of the paper's alternatives pass" in text
    assert "rank 30 (more than $d_q = 32$)" in prose.exact_tests_text(_tests(real_realisable=False), _heads())


def test_search_table_formats_each_column():
    html = prose.search_table(_search()).to_html()
    assert "TV search (mean)" in html and "0.5000" in html and "5e-01" in html and "–" in html  # NaN rank


def _summary(survey=None, exact=True, thr=None, tests=None, search=None) -> str:
    return prose.summary_text(
        survey or _survey(),
        _alternatives(),
        _heads(),
        _exact(exact),
        thr or _threshold(),
        tests or _tests(),
        search or _search(),
        ["**C1.** The claim **holds**. one", '<span id="verdict-c2"></span>**C2.** The claim **fails**. two'],
        "m",
    )


def test_summary_text_states_the_claim_and_ends_with_the_verdicts_unanchored():
    text = _summary()
    assert text.startswith("**The claim** — beyond $d_v$ tokens") and "in 100.0% of 216 measured heads" in text
    assert "at most 1e-13, singular values kept down to 1e-03, rounding noise at 3e-16)" in text
    assert "reproduce the output to 1e-14 and, at $d_s = 40$, move rows by a total variation of 0.30" in text
    assert "C1 and C15 below judge it." in text and "C3 and C16 below judge the objection." in text
    assert text.endswith(
        "*Model m, 3 texts; all numbers computed by this page.*\n\n**C1.** The claim **holds**. one\n\n"
        "**C2.** The claim **fails**. two"
    )


def test_summary_text_leaves_the_decisions_to_the_verdicts():
    """What only the verdicts read (C2's and C15-C17's inputs) changes no word of the summary."""
    same = [
        _summary(survey=_survey(alternatives_at_dv2=False)),
        _summary(thr=_threshold(unique_share=0.5)),
        _summary(search=_search(dimension_count_confirmed=False)),
    ]
    assert same == [_summary()] * 3


def test_summary_text_objection_2_follows_the_exact_example():
    text = _summary(survey=_survey(share_rank_T_full=0.99))
    assert "the exact example ($d_s = 3$, $d_v = 2$) admits only $A$ itself, and 288 of 288 real" in text
    assert "in 99.0% of the surveyed heads. C2 and C17 below judge where the threshold lies." in text
    other = _summary(exact=False)
    assert "admits alternatives (see Section 3), and 288 of 288 real" in other and "only $A$ itself" not in other


def test_summary_text_objection_1_follows_the_exact_test():
    causal = _summary(tests=_tests(causal=True))
    assert "**Objection 1 (softmax realisability).** The exact test does not apply to this causal model. " in causal
    assert "exact test (" not in causal
    text = _summary()
    assert "fail the exact test (a centred log of rank 39 $> d_q = 32$). Realisable" in text
    assert "does not apply" not in text and "pass the exact test" not in text
    some = _summary(tests=_tests(paper_realisable=True))
    assert "Some of the paper's alternatives tested on the chosen head pass the exact test (see Section 4). " in some
    assert "fail the exact test" not in some


def test_summary_text_names_the_lengths_the_search_found_alternatives_at():
    text = _summary()
    assert f"(mean row TV above {C3_REALISABLE_TV:g}) were found at $d_s$ = 34, 40 (a closed-form" in text
    assert "largest row 0.568); at $d_s \\le d_v + 1$ they move rows by less than $10^{-8}$. They need" in text
    partly = _summary(search=_search(realisable_by_ds={34: False, 40: True}))
    assert "were found at $d_s$ = 40, not at 34 (a closed-form" in partly
    assert "were found at $d_s$ = no length, not at 34 (" in _summary(search=_search(realisable_by_ds={34: False}))
    moved = _summary(search=_search(realisable_none_at_threshold=False))
    not_tried = _summary(search=_search(table=_rows((34, 32, 32), (40, float("nan"), 224))))
    for other in (moved, not_tried):  # the threshold moved, or no length at it was searched
        assert "largest row 0.568). They need" in other and "less than $10^{-8}$" not in other


def test_summary_text_compares_the_logits_with_the_real_heads():
    assert "They need far more extreme logits than the real head (smallest weight 9e-07 vs 1e-03), so whether" in (
        extreme := _summary(search=_search(search_min_prob=9e-7))
    )
    assert "whether *this* head's weights could produce them stays open. C3 and C16" in extreme
    within = _summary(search=_search(search_min_prob=1.1e-6))
    assert "Their logits stay within about the real head's range (smallest weight 1e-06 vs 1e-03)." in within
    assert "extreme logits" not in within
    nothing = _summary(search=_search(search_min_prob=None))
    assert "extreme logits" not in nothing and "logits stay within" not in nothing
    assert "largest row 0.568); at $d_s \\le d_v + 1$ they move rows by less than $10^{-8}$.  C3 and C16" in nothing


def test_search_text_states_where_realisable_alternatives_were_found():
    text = prose.search_text(_search())
    assert text.startswith("**Realisable alternatives (objection 1), measured.** At $d_s \\ge d_v + 2$ (2 runs, ")
    assert "(2 runs, $d_s$ = 34–40) the search found" in text and "Verdict" not in text
    assert f"total variation above {C3_REALISABLE_TV:g} (C3's), at $d_s$ = 34, 40 (relative output error" in text
    assert "at most 1.0e-12; rank of its centred log at most 32 $\\le d_q = 32$). " in text
    partly = prose.search_text(_search(realisable_by_ds={34: False, 40: True}))
    assert "(C3's), at $d_s$ = 40, not at 34 (relative output error" in partly
    assert "(C3's), at $d_s$ = no length, not at 34 (" in prose.search_text(_search(realisable_by_ds={34: False}))
    causal = prose.search_text(_search(causal=True, search_rank_max=None))
    assert "(relative output error at most 1.0e-12). " in causal and "centred log" not in causal


def test_search_text_says_when_no_length_beyond_the_threshold_was_searched():
    text = prose.search_text(
        _search(
            table=_rows((33, float("nan"), 0)),
            by_length=_by_length(33),
            beyond_runs=0,
            realisable_by_ds={},
            search_error_max=None,
            search_min_prob=None,
            A_min_prob=None,
            search_rank_max=None,
        )
    )
    assert "measured.** No length $d_s \\ge d_v + 2$ was searched. At $d_s \\le d_v + 1$ the" in text
    assert "the search found" not in text and "Near the threshold" not in text
    assert text.endswith(
        "as Section 3's count says. Claim C16, judged at the end of the chapter, applies its rule to these numbers."
    )


def test_search_text_states_the_move_at_the_threshold_and_beyond():
    text = prose.search_text(_search())
    assert "At $d_s \\le d_v + 1$ the realisable alternatives move rows by less than $10^{-8}$, as Section 3's" in text
    assert "Near the threshold they barely differ (mean TV 2.0e-03 at $d_s = 34$); at $d_s = 40$ rows move by " in text
    assert "0.123 on average and up to 0.568, against 0.300 for the unconstrained" in text
    moved = prose.search_text(_search(realisable_none_at_threshold=False))
    not_tried = prose.search_text(_search(table=_rows((34, 32, 32), (40, float("nan"), 224))))
    for other in (moved, not_tried):  # the threshold moved, or no length at it was searched
        assert "less than $10^{-8}$" not in other and "). Near the threshold" in other


def test_search_text_sets_the_measured_dimension_beside_the_count():
    text = prose.search_text(_search())
    counts = "0 against 0 at $d_s = 33$; 32 against 32 at $d_s = 34$. "
    assert "The measured solution dimension, against the count $d_q(d_s - d_q - 1)$: " + counts in text
    assert "at $d_s = 40$." not in text  # not measured there
    spread = prose.search_text(_search(table=_rows((34, 31, 32), (34, 32, 32), (35, 64, 64), (35, 64, 64))))
    assert ": 31–32 against 32 at $d_s = 34$; 64 against 64 at $d_s = 35$. Claim C16" in spread
    none = prose.search_text(_search(table=_rows((34, float("nan"), 32))))
    assert "measured solution dimension" not in none and "unconstrained row-stochastic alternatives. Claim C16" in none


def test_search_text_compares_the_logits_with_the_real_heads():
    text = prose.search_text(_search(search_min_prob=9e-7))
    assert "these numbers.\n\n*Caveat.* These alternatives are realisable in the sense of the objection" in text
    assert "their smallest weight is 9e-07 where $A$'s is 1e-03. Whether" in text and "stay within" not in text
    within = prose.search_text(_search(search_min_prob=1.1e-6))
    assert within.endswith(
        "these numbers.\n\nTheir smallest weight is 1e-06 where $A$'s is 1e-03: their logits stay within about the "
        "real head's range."
    )
    assert "Caveat" not in within


def test_the_stand_ins_have_the_fields_of_the_study_types():
    from identifiability.studies import nonidentifiability as study

    pairs = [
        (_survey(), study.NullSpaceSurvey),
        (_alternatives(), study.Alternatives),
        (_heads(), study.HeadDistances),
        (_threshold(), study.Threshold),
        (_tests(), study.ExactTests),
        (_search(), study.RealisableSearch),
        (_exact(True), study.ExactThreshold),
    ]
    assert stand_ins_match(pairs) == []
