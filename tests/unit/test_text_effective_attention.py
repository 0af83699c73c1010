"""Chapter 3's words (identifiability.text.effective_attention): each wording, from numbers on each side of
the branch that chooses it."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest
import torch

from identifiability.base.stats import Interval
from identifiability.corpus.token_roles import OTHER, PUNCTUATION, SEPARATOR, START
from identifiability.studies import effective_attention as study
from identifiability.text import effective_attention as prose
from identifiability.verdicts.effective_attention import C5_PEAK, C4Evidence, C5Category

from .test_text import stand_ins_match


def _wo(deficient: int = 0, causal: bool = False) -> NS:
    rank = torch.tensor([[32, 32], [32, 32 - deficient]])
    return NS(
        d_v=32, wo_rank_min=int(rank.min()), wo_deficient_heads=deficient, wo_rank=rank, family="gpt2", causal=causal
    )


def test_out_projection_text_says_whether_every_head_has_full_rank():
    full = prose.out_projection_text(_wo())
    assert full.startswith("$W_O^h$ has rank 32 to 32 (d_v = 32): full rank for all 4 heads")
    deficient = prose.out_projection_text(_wo(deficient=2))
    assert "rank 30 to 32" in deficient and "1 of 4 heads are rank deficient" not in deficient
    assert "2 of 4 heads are rank deficient; their $V_h$ is projected" in deficient
    assert "causal model" not in full
    assert "\n\n*gpt2 is a causal model: its raw attention is lower-triangular." in prose.out_projection_text(
        _wo(causal=True)
    )


def _c4(identical: bool = True, deficient: int = 0) -> NS:
    return NS(identical_at_or_below_dv=identical, deficient_at_or_below_dv=deficient, min_at_or_below_dv=1 - 2e-12)


def _fig1(**kw) -> NS:
    base = dict(
        d_v=32,
        pearson_min_at_or_below_dv=1 - 3e-12,
        c4=_c4(),
        table=pd.DataFrame({"d_s": [16, 32, 40], "layer": [1, 2, 1], "head": [0, 3, 1], "pearson": [1.0, 0.97, 0.5]}),
        null_heads_at_or_below_dv=0,
        heads_at_or_below_dv=48,
        null_dim_equals_ds_minus_dv=1.0,
        ds_just_above_dv=33,
        first_ds_median_below_0_9=40,
        pearson_median_by_layer_longest=[0.5, 0.25],
        pearson_median_just_above_dv=0.99,
        fig1_longest=64,
        pearson_median_longest=0.375,
        fig1_lengths=[16, 32, 34, 64],
        pearson_median_by_length={
            "model": [1.0, 1.0, 0.9, 0.4],
            "random subspace": [1.0, 1.0, 0.95, 0.7],
            "random weights": [1.0, 1.0, 0.8, 0.3],
        },
        null_share_median_longest=0.75,
    )
    return NS(**(base | kw))


def test_raw_vs_effective_text_below_d_v_has_four_wordings():
    none = prose.raw_vs_effective_text(_fig1(pearson_min_at_or_below_dv=None))
    assert none.startswith("**Measured.** No input has $d_s \\le d_v = 32$;")
    same = prose.raw_vs_effective_text(_fig1())
    assert (
        "Up to $d_s = d_v = 32$ every head of every input has $A_\\text{eff} = A$ (1 minus the smallest correlation: "
        "3.0e-12)" in same
    )
    deficient = prose.raw_vs_effective_text(_fig1(c4=_c4(deficient=3), pearson_min_at_or_below_dv=0.96))
    assert (
        "every head with an empty LN(T) has $A_\\text{eff} = A$ (smallest correlation 1 minus 2.0e-12); 3 head-input(s)"
        in deficient
    )
    assert "(smallest correlation 0.96000)" in deficient
    broken = prose.raw_vs_effective_text(_fig1(c4=_c4(identical=False), pearson_min_at_or_below_dv=0.97))
    assert (
        "At $d_s \\le d_v = 32$, 1 head-input(s) have $A_\\text{eff} \\ne A$: the smallest correlation is 0.97000 "
        "(layer 2, head 3, $d_s$ = 32)" in broken
    )


def test_raw_vs_effective_text_beyond_d_v_says_where_the_median_falls_below_0_9():
    text = prose.raw_vs_effective_text(_fig1())
    assert (
        "Just above $d_v$ ($d_s$ = 33) the median correlation is 0.99; it is first below 0.9 at $d_s$ = 40, and at "
        "$d_s$ = 64 it is 0.38 (layers 1–2: 0.50, 0.25)." in text
    )
    stays = prose.raw_vs_effective_text(_fig1(first_ds_median_below_0_9=None))
    assert "it stays at or above 0.9 at every length measured" in stays
    nothing = prose.raw_vs_effective_text(_fig1(ds_just_above_dv=None))
    assert "Just above" not in nothing and nothing.endswith("for 100.00% of all head-inputs.")


def test_curves_text_compares_the_model_with_each_null_curve():
    text = prose.curves_text(_fig1())
    assert text.startswith("From $d_s = d_v + 2 = 34$ to 64, the model's median correlation lies ")
    assert "below the random subspace curve at 2 of 2 lengths (widest gap 0.30, at $d_s$ = 64)" in text
    assert "and below the random weights curve at 0 of 2 lengths." in text  # no gap to name
    assert text.endswith("At $d_s$ = 64: model 0.400, random subspace 0.700.")


def test_curves_text_leaves_out_a_null_curve_not_measured_and_says_when_nothing_is_long_enough():
    med = _fig1().pearson_median_by_length | {"random weights": [math.nan] * 4}
    assert "random weights" not in prose.curves_text(_fig1(pearson_median_by_length=med))
    short = prose.curves_text(_fig1(fig1_lengths=[16, 32, 33]))
    assert short == "No input has $d_s \\ge d_v + 2 = 34$: the curves cannot be compared beyond $d_v$."


def test_null_share_text_says_most_or_less_than_half():
    assert "75% of its attention matrix's norm in the null part: most of a raw" in prose.null_share_text(_fig1())
    assert "40% of its attention matrix's norm in the null part: less than half of" in prose.null_share_text(
        _fig1(null_share_median_longest=0.4)
    )


def _precision(ds: list[int]) -> NS:
    return NS(
        precision_check_heads=96,
        max_ds=64,
        other="float64",
        precision="float32",
        precision_rank_differences=len(ds),
        precision_rank_difference_ds=ds,
        precision_max_pearson_difference=3e-7,
    )


def test_precision_text_names_the_lengths_where_the_rank_changes():
    same = prose.precision_text(_precision([]))
    assert same == (
        "96 head-inputs with $d_s \\le 64$ recomputed in float64: the null-space dimension differs for 0; the largest "
        "change of a correlation is 3.0e-07."
    )
    differ = prose.precision_text(_precision([31, 32]))
    assert (
        "differs for 2 (at $d_s$ = 31, 32: a value matrix whose smallest singular value is below float32's tolerance "
        "but above float64's;" in differ
    )


def _mass(categories: list[str]) -> NS:
    idx = pd.MultiIndex.from_product([[1, 2], categories], names=["layer", "category"])
    raw = [0.1 * (i + 1) for i in range(len(idx))]
    by_layer = pd.DataFrame({"raw": raw, "effective": [r / 2 for r in raw]}, index=idx)
    return NS(
        mass_sentences=12,
        mass_categories=categories,
        mass_mean={c: {"raw": 0.2, "effective": 0.1} for c in categories},
        by_layer=by_layer,
        labels={START: "start ([CLS])", SEPARATOR: "separator ([SEP])"},
    )


def test_no_separator_text_says_what_the_tokenizer_lacks():
    assert prose.no_separator_text(_mass([START, SEPARATOR, OTHER])) == ""
    assert prose.no_separator_text(_mass([START, OTHER])).startswith(
        "This tokenizer adds no separator token to a sentence"
    )
    assert prose.no_separator_text(_mass([PUNCTUATION, OTHER])).startswith(
        "This tokenizer adds neither a start nor a separator"
    )


def test_mass_text_lists_each_category_and_what_is_missing():
    text = prose.mass_text(_mass([START, SEPARATOR, PUNCTUATION, OTHER]), 33)
    assert text.startswith("**Measured on 12 sentences of 33+ tokens.**\n\n")
    assert (
        "- **start ([CLS])**: mean mass 0.200 raw vs 0.100 effective (-50%); in layer 2, where its raw mass peaks, "
        "0.500 vs 0.250." in text
    )
    assert f"- **{PUNCTUATION}**: 0.200 raw vs 0.100 effective." in text and "not testable" not in text
    missing = prose.mass_text(_mass([START, OTHER]), 33)
    assert missing.endswith(
        "\n\nThis tokenizer adds no separator token to a sentence, so there is no separator mass to compare and C5 is "
        "not testable on this model."
    )


def test_separators_text_measures_the_pairs_or_says_why_not():
    assert prose.separators_text(None, "lee_pairs").startswith("No sentence pair of `lee_pairs` is longer than $d_v$")
    assert prose.separators_text(NS(pairs=0), "lee_pairs").startswith("No pair holds two separator tokens")
    means = pd.DataFrame({"raw": [0.25, 0.5], "effective": [0.125, 0.0625]}, index=["first", "second"])
    text = prose.separators_text(NS(pairs=8, means=means), "lee_pairs")
    assert (
        "On 8 sentence pairs of `lee_pairs`: the separator between the segments receives 0.250 of a query's attention "
        "raw and 0.125 effective; the final one 0.500 raw and 0.062 effective" in text
    )


def _c5(category: str, token: str, peak: float) -> C5Category:
    i = Interval(0.5, 0.4, 0.6, 10)
    return C5Category(category, token, category != "start", peak, i, i, 0.75, i, i)


def test_c5_text_names_the_sink_and_each_peak():
    assert prose.c5_text(()).startswith("This tokenizer adds no start or separator token")
    peaked = prose.c5_text((_c5("start", "[CLS]", 12.0), _c5("end separator", "[SEP]", 1.5)))
    assert peaked.startswith(
        "This model's attention sink is **start ([CLS])**: its raw mass per query row is 12.0x the uniform share "
        "1/$d_s$, the largest of the special tokens."
    )
    assert (
        "- **start ([CLS])** on sentences: raw mass per query row 12.0x the uniform share (a peak); effective / raw "
        "summed mass 0.50 (random subspace 0.75)" in peaked
    )
    assert (
        "- **end separator ([SEP])** on sentences: raw mass per query row 1.5x the uniform share (below "
        f"{C5_PEAK:g}x: no peak)" in peaked
    )
    flat = prose.c5_text((_c5("start", "[CLS]", 1.0),))
    assert "is 1.0x the uniform share 1/$d_s$, but no special token reaches a peak." in flat


@pytest.mark.parametrize(
    ("digits", "unit"), [(1, "tenths"), (2, "hundredths"), (3, "thousandths"), (5, "units of 10^-5")]
)
def test_page_text_names_the_unit_the_viewer_ships(digits, unit):
    text = prose.page_text({"figure_1a": 42_000, "head_viewer": 1_500_000}, NS(viewer_lengths=[3, 4]), 6, 12, digits)
    assert text == (
        "Page weight of this chapter's largest charts: Figure 1 (a) 42 kB, head viewer 1.50 MB (1,800 attention "
        f"cells of raw attention and of its null part, shipped as integers in {unit}; the effective attention is "
        "computed in the browser)."
    )


def test_the_stand_ins_have_the_fields_of_the_study_types():
    pairs = [
        (_wo(), study.OutProjectionRanks),
        (_c4(), C4Evidence),
        (_fig1(), study.RawVsEffective),
        (_precision([]), study.PrecisionCheck),
        (_mass([START]), study.MassByCategory),
        (NS(pairs=8, means=None), study.PairSeparators),
        (NS(viewer_lengths=[3]), study.ViewerExamples),
    ]
    assert stand_ins_match(pairs) == []
