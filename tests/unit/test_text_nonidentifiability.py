"""Chapter 2's words (identifiability.text.nonidentifiability): each wording, from numbers on each side of
the branch that chooses it. (``null_space_verdict_text`` and ``search_text`` are still in the charts
module, on their way to claim rows.)"""

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


def _threshold(move: float = 1e-12, unique_share: float = 1.0) -> NS:
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
        threshold_me_tv_max=move / 2,
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


def _search(**kw) -> NS:
    row = {c: 0.5 for c in SEARCH} | {"d_s": 40, "layer": 2, "head": 1, "search_rank": float("nan")}
    base = dict(
        table=pd.DataFrame([row]),
        realisable_by_ds={34: True, 40: True},
        search_max_tv_mean=0.1234,
        search_max_tv_row=0.5678,
        realisable_none_at_threshold=True,
        dimension_count_confirmed=True,
        search_min_prob=1e-9,
        A_min_prob=1e-3,
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
    return NS(examples={"A": sp.eye(3), "generic": generic | {"unique": unique}, "deficient": deficient})


def test_exact_threshold_text_says_whether_the_generic_solution_is_unique():
    assert "**only A itself**" in prose.exact_threshold_text(_exact(True))
    assert "**not unique**" in prose.exact_threshold_text(_exact(False))
    assert "with 0 free parameters" in prose.exact_threshold_text(_exact(True))


def test_threshold_text_reads_the_move_and_the_survey():
    text = prose.threshold_text(_threshold(move=1e-12), _survey())
    assert "in total variation: zero up to rounding" in text
    assert "so for this model the threshold is $d_s \\ge d_v + 2 = 34$." in text
    moved = prose.threshold_text(_threshold(move=2 * prose.NONE_TV), _survey(share_rank_T_full=0.99))
    assert "in total variation: **not** zero" in moved
    assert "threshold is lower for the heads whose $T$ is rank-deficient." in moved


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
        NS(exact_generic_unique=exact),
        thr or _threshold(),
        tests or _tests(),
        search or _search(),
        ["**C1 — holds.** one", '<span id="verdict-c2"></span>**C2 — fails.** two'],
        "m",
    )


def test_summary_text_states_the_claim_and_ends_with_the_verdicts_unanchored():
    text = _summary()
    assert text.startswith("**The claim** — beyond $d_v$ tokens") and "in 100.0% of 216 measured heads" in text
    assert text.endswith(
        "*Model m, 3 texts; all numbers computed by this page.*\n\n**C1 — holds.** one\n\n**C2 — fails.** two"
    )


def test_summary_text_objection_2_follows_the_exact_example_and_the_heads():
    text = _summary()
    assert "(exactly, $d_s = 3$, $d_v = 2$; and in 288 of 288 real (input, head) pairs)." in text
    assert "reads $d_s \\ge d_v + 2$ for this model" in text
    unconfirmed = _summary(exact=False)
    assert "(the exact example did not confirm this: see Section 3)." in unconfirmed
    assert "do not place the threshold at $d_s = d_v + 2$ for every head" in unconfirmed
    for other in (_summary(thr=_threshold(unique_share=0.9)), _summary(survey=_survey(alternatives_at_dv2=False))):
        assert "do not place the threshold" in other and "reads $d_s \\ge d_v + 2$" not in other


def test_summary_text_objection_1_follows_the_exact_test():
    assert "The exact test does not apply to this causal model." in _summary(tests=_tests(causal=True))
    text = _summary()
    assert "The paper's alternatives are not realisable (a centred log of rank 39 $> d_q = 32$)." in text
    some = _summary(tests=_tests(paper_realisable=True))
    assert "Some of the paper's alternatives pass the exact test (see Section 4)." in some


def test_summary_text_names_the_lengths_the_search_found_alternatives_at():
    text = _summary()
    assert f"(mean row TV above {C3_REALISABLE_TV:g}) were found at $d_s$ = 34, 40 (a closed-form" in text
    assert "largest row 0.568) — and none at $d_s \\le d_v + 1$." in text
    assert "Their number matches the count" in text
    partly = _summary(
        search=_search(
            realisable_by_ds={34: False, 40: True}, realisable_none_at_threshold=False, dimension_count_confirmed=False
        )
    )
    assert "were found at $d_s$ = 40, not at 34 (" in partly and "largest row 0.568). " in partly
    assert "none at $d_s \\le d_v + 1$" not in partly and "Their number matches" not in partly
    assert "were found at $d_s$ = no length, not at 34" in _summary(search=_search(realisable_by_ds={34: False}))


def test_summary_text_compares_the_logits_with_the_real_heads():
    assert "They need far more extreme logits than the real head (smallest weight 1e-09 vs 1e-03)" in _summary()
    within = _summary(search=_search(search_min_prob=1e-4))
    assert "Their logits stay within about the real head's range (smallest weight 1e-04 vs 1e-03)." in within
    nothing = _summary(search=_search(search_min_prob=None))
    assert "extreme logits" not in nothing and "logits stay within" not in nothing


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
