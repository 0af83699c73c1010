"""Chapter 6's words (identifiability.text.context_mixing): each wording, from numbers on each side of the
branch that chooses it."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest

from identifiability.base.stats import Interval
from identifiability.studies import context_mixing as study
from identifiability.text import context_mixing as prose
from identifiability.verdicts import Verdict
from identifiability.verdicts.context_mixing import C10_HIGH, C10_LOW, C10_WIDE, C11_FAR, C11_NEAR, C10Evidence

from .test_text import stand_ins_match


def _exact(method: str = "folded", causal: bool = False) -> NS:
    return NS(
        method=method,
        family="gpt2",
        causal=causal,
        exact=[NS(n_tokens=6, seconds=2.0), NS(n_tokens=10, seconds=4.0)],
        estimated=[NS(n_tokens=6, seconds=0.1), NS(n_tokens=10, seconds=0.2)],
        exact_sentences=2,
        exact_seconds_per_sentence=3.0,
        estimator_probes=16,
        estimate_seconds_per_sentence=0.15,
    )


def test_engine_text_names_the_engine_and_what_a_causal_model_changes():
    assert prose.engine_text(_exact()) == (
        "**Engine for this model:** `folded` (the folded forward-mode pass for post-LayerNorm BERT-style layers)."
    )
    generic = prose.engine_text(_exact("generic", causal=True))
    assert (
        "`generic` (generic `torch.func` forward mode: the folded pass applies only to post-LN BERT-style layers, and "
        "gpt2 is not one" in generic
    )
    assert generic.endswith(
        " **This model is causal:** a token only sees earlier tokens, so contributions from later positions are "
        "exactly zero and the first token always contributes 100% to itself."
    )
    assert "causal" not in prose.engine_text(_exact("generic"))


def test_cost_text_compares_exact_and_estimated():
    assert prose.cost_text(_exact()) == (
        "Exact HTA: 2 sentences of 6–10 tokens, 3.0 s per sentence; the estimator with 16 probes per token: 0.15 s "
        "per sentence (20x cheaper)."
    )


def _estimator(signed: float) -> NS:
    err = dict(
        entries=12345,
        median=0.05,
        p95=0.2,
        max=0.9,
        abs_median=0.001,
        abs_p95=0.004,
        top_agreement=0.95,
        signed_median=signed,
    )
    return NS(
        estimator_error=err,
        by_length={"6–11 tokens": dict(median=0.04, p95=0.1, top_agreement=0.96)},
        estimator_probes_for_1pct=400,
        probes=16,
        estimator_effect_on_own_median=0.0123,
        estimator_effect_on_top_is_self_pct=1.5,
        d_model=384,
        exact_seconds_by_length={"6–11 tokens": 1.25},
    )


@pytest.mark.parametrize(
    ("signed", "runs"),
    [(0.001, "high more often than low"), (-0.001, "low more often than high"), (0.0, "as often high")],
)
def test_estimator_text_says_which_way_the_estimate_runs(signed, runs):
    text = prose.estimator_text(_estimator(signed), _exact())
    assert f"the median signed error is {100 * signed:.2f}%, so the estimate of c runs {runs}." in text
    assert "relative error of $c$ median **5.0%**, 95th percentile **20.0%**, maximum 90%" in text
    assert "roughly 400 probes per token on this model, 104% of the 384 directions" in text
    assert "6–11 tokens: median 4.0%, 95th percentile 10.0%, same top contributor for 96% of hidden tokens" in text
    assert text.endswith("Exact HTA took 1.2 s per sentence at 6–11 tokens (its cost grows like $d_s^2$).")


@pytest.mark.parametrize(("rank", "spread"), [(5.0, "far below"), (20.0, "below"), (40.0, "close to")])
def test_rank_text_places_the_median_rank_against_the_dimensions(rank, spread):
    text = prose.rank_text([64.0, rank, rank], 0, 64, 16)  # position 0 is the token's own block
    assert "from the 2 other input tokens have effective rank" in text
    assert f"(median {rank:.1f}), {spread} the 64 dimensions a block has" in text
    assert f"= {100 * (2 * 16 * rank) ** -0.5:.1f}% at the median rank" in text


def test_rank_text_without_other_tokens():
    assert prose.rank_text([64.0], 0, 64, 16).startswith("The sentence has no other input token")


def _corpus() -> NS:
    return NS(
        corpus_mode="exact",
        corpus_sentences={"lee": 20, "wiki": 10},
        corpus_tokens={"lee": 400, "wiki": 250},
        corpus_seconds=61.4,
        main="lee",
    )


def test_corpus_text_lists_each_corpus():
    assert (
        prose.corpus_text(_corpus())
        == "exact HTA on 20 sentences of 'lee' (400 tokens), 10 sentences of 'wiki' (250 tokens) in 61 s."
    )


def _own(monotone: dict, first: float = 0.4) -> NS:
    return NS(medians=[first, 0.3, 0.35], own_monotone=monotone, rises=[3], top_median_last=0.456)


def test_own_share_text_falls_or_rises_again():
    falls = prose.own_share_text(_own({"lee": True}), "lee")
    assert falls.startswith(
        "**Measured.** On 'lee' the median own-token share goes from 40.0% in layer 1 to 35.0% in layer 3, lower at "
        "every layer. In layer 1"
    )
    rises = prose.own_share_text(_own({"lee": False, "wiki": True, "news": False}), "lee")
    assert "in layer 3, rising again at layer 3; wiki: monotone, news: not monotone. In layer 1" in rises


def test_own_share_text_mixing_after_one_layer():
    strong = prose.own_share_text(_own({"lee": True}, first=0.4), "lee")
    assert (
        "the own token's median share is 40%, so more than half of a hidden token comes from other tokens already "
        "after one layer: mixing is strong." in strong
    )
    weak = prose.own_share_text(_own({"lee": True}, first=0.6), "lee")
    assert "so a hidden token is still mostly its own input after one layer." in weak
    assert weak.endswith("The median share of the most-contributing token is 45.6% in the last layer.")


def _evidence(special: Interval | None) -> NS:
    i = Interval(0.7, 0.6, 0.8, 20)
    return NS(share=i, words=Interval(0.65, 0.55, 0.75, 20), special=special, original=i)


SPECIAL = Interval(0.9, 0.8, 1.0, 20)


SHARE = Interval(0.7, 0.6, 0.8, 20)


def _top(special: Interval | None = SPECIAL, share: Interval | None = SHARE) -> NS:
    e = _evidence(special)
    e.share = share
    return NS(top_is_self_pct={"lee": [90.0, 70.0, 65.0]}, lost_top_last_pct={"lee": 35.0}, evidence=e)


def test_top_text_states_the_corpus_shares():
    assert prose.top_text(_top(), "exact") == (
        "**Measured (exact HTA).** The own input token is the largest contributor for 65–90% of the tokens of 'lee' "
        "per layer. In the last layer it has lost that place for 35% ('lee') of the tokens, against the paper's "
        "about 30% (12 layers). C10's verdict uses exact HTA: an argmax over estimated contributions is biased by "
        "the estimator's noise."
    )


CAPTION = "recorded run of 2026-12-03 (2 h 7 min, Linux, 2 CPUs, torch 2.5); `make record-c10` recomputes it"


def _recorded(live: list[float], then: list[float | None], special: list | None = None) -> NS:
    """A TopContributor stand-in fed by a recorded run: every number the page shows is a distinct value."""
    return NS(
        c10_sample={
            "date": "2026-12-03",
            "sentences": 66,
            "distinct": 64,
            "hidden_tokens": 2345,
            "covered": 0.907,
            "max_tokens": 49,
            "half_width": 0.0271,
        },
        c10_shares={"all": [0.612, 0.585, 0.639], "words": [0.654, 0.627, 0.681], "special": special},
        c10_live={"share": live, "recorded": then},
        caption=CAPTION,
    )


def test_recorded_text_shows_the_recorded_runs_numbers_and_the_live_ones_beside_them():
    text = prose.recorded_text(_recorded([0.625, 0.5], [0.625, 0.5], [0.031, 0.012, 0.05]))
    assert text == (
        f"**C10's sample** ({CAPTION}): 66 sentences drawn in proportion to their tokens (64 distinct, 2,345 hidden "
        "tokens), from the sentences of up to 49 tokens, which hold 90.7% of the corpus's hidden tokens. The own "
        "token stays on top for 61.2% (95% interval 58.5% to 63.9%) of the hidden tokens per sentence "
        "(half-width 0.027); word tokens 65.4% (95% interval 62.7% to 68.1%), special tokens 3.1% (95% interval "
        "1.2% to 5.0%). Computed live in this build, 2 of its sentences: 62.5% (recorded: 62.5%), 50.0% "
        "(recorded: 50.0%), the same as recorded."
    )
    moved = prose.recorded_text(_recorded([0.625], [0.6]))
    assert "62.5% (recorded: 60.0%), not all the same as recorded" in moved and "special tokens none" in moved


def test_recorded_text_without_a_recorded_run_names_the_command_and_decides_nothing():
    r = NS(c10_sample=None, c10_live={"share": [0.625], "recorded": [None]}, caption="no recorded run: `make x`")
    assert prose.recorded_text(r) == (
        "**C10's sample: not run in this build.** No recorded run: `make x`. The 1 sentence(s) computed live give "
        "62.5% (recorded: not among its sentences): too few to decide anything."
    )


def test_sample_text_names_the_live_draws_and_the_eligible_sentences():
    t = NS(live_sentences=2, live_from=8, live_seed=0, eligible_max_tokens=49, eligible_covered=0.907, lengths=[19, 22])
    assert prose.sample_text(t) == (
        "C10's sample draws from the sentences of up to 49 tokens (the corpus's 95th percentile; 90.7% of its "
        "hidden tokens) in proportion to their tokens. Computed live here: the 2 shortest of its first 8 draws "
        "(seed 0), of 19 tokens, 22 tokens, to check that this build reproduces the recorded numbers (exact HTA "
        "costs like $d_s^2$)."
    )


def test_band_text_adds_the_original_sample_when_there_is_one():
    robust = (("band wide", "holds"), ("band narrow", "fails"), ("words only", "inconclusive"))
    v = NS(label="holds", robustness=robust, original=None)
    assert prose.band_text(v) == (
        f"**How C10 moves with the band.** With the rule's band [{C10_LOW:g}, {C10_HIGH:g}]: holds; widened to "
        f"[{C10_LOW - C10_WIDE:g}, {C10_HIGH + C10_WIDE:g}]: holds; narrowed to [{C10_LOW + C10_WIDE:g}, "
        f"{C10_HIGH - C10_WIDE:g}]: fails; word tokens only: inconclusive."
    )
    with_original = prose.band_text(NS(label="holds", robustness=robust, original=NS(label="fails")))
    assert with_original.endswith(
        "word tokens only: inconclusive; on the original rule's sample (the short exact sentences): fails."
    )


def _locality(near: list[float], far: list[float], share: list[float] | None = None, evidence=None) -> NS:
    k = len(near)
    share = share or [0.3 + 0.1 * i for i in range(k)]
    means = pd.DataFrame(
        {"layer": list(range(1, k + 1)), "near": near, "far": far, "uniform": [0.05] * k}
        | {"far_share": share, "far_share_uniform": [0.4] * k}
    )
    tables = pd.DataFrame(
        {"layer": list(range(1, len(near) + 1)), "within_3": [0.5] * len(near), "uniform_within_3": [0.3] * len(near)}
    )
    return NS(means={"lee": means}, tables={"lee": tables}, evidence=evidence)


def test_locality_table_names_and_formats_its_columns():
    html = prose.locality_table(_locality([0.1, 0.2], [0.01, 0.02])).to_html()
    assert (
        f"one token within ±{C11_NEAR}" in html and f"one token beyond ±{C11_FAR}" in html and "uniform: 1/d_s" in html
    )
    assert "context share within ±3" in html and "uniform: share within ±3" in html
    assert f"far share f of the context (beyond ±{C11_FAR})" in html and "uniform: f" in html and ">40.0%<" in html
    assert ">0.1000<" in html and ">50.0%<" in html


def test_locality_text_near_against_far():
    local = prose.locality_text(_locality([0.1, 0.2], [0.01, 0.02]), "lee")
    assert local.startswith(
        f"**Measured.** In 'lee', one input token within {C11_NEAR} of a hidden token contributes on average 0.100 in "
        "layer 1 and 0.200 in layer 2;"
    )
    assert (
        "A near token outweighs a far one in every layer (10.0 to 10.0 times as much), and a far token's contribution "
        "grows from the first layer to the last." in local
    )
    assert local.endswith(
        f"Of what a hidden token takes from other tokens, the part from tokens beyond {C11_FAR} (its far share f) "
        "is 30.0% in layer 1 and 40.0% in layer 2: it grows; uniform mixing over the context would give 40.0% in "
        "every layer."
    )
    mixed = prose.locality_text(_locality([0.1, 0.01, 0.05], [0.02, 0.02, 0.02], [0.3, 0.3, 0.2]), "lee")
    assert "A near token outweighs a far one in 2 of 3 layers (0.5 to 5.0 times as much)" in mixed
    assert "a far token's contribution does not grow from the first layer to the last." in mixed
    assert "is 30.0% in layer 1 and 20.0% in layer 3: it does not grow;" in mixed


def _dilution(excess: Interval) -> NS:
    growth, diluted = Interval(0.02, 0.015, 0.025, 40, "sentences"), Interval(0.019, 0.017, 0.021, 40, "sentences")
    if not excess.n:  # the study's evidence where no hidden token has a far input token
        growth = diluted = excess
    e = NS(far_growth=growth, dilution_growth=diluted, far_growth_minus_dilution=excess, near_minus_far=[0] * 12)
    return _locality([0.1], [0.01], evidence=e)


def test_dilution_text_sets_version_3s_growth_against_dilution():
    same = prose.dilution_text(_dilution(Interval(0.001, -0.002, 0.004, 40, "sentences")))
    assert same == (
        "**Beside the verdict, not part of it.** Version 3 of C11's rule read the growth of one far token's mean "
        "contribution: 0.0200 (95% interval 0.0150 to 0.0250, 40 sentences). If the own token's lost share were "
        "spread evenly over the other d_s - 1 tokens, that mean would grow by 0.0190 (95% interval 0.0170 to 0.0210, "
        "40 sentences); observed minus predicted at layer 12: 0.00100 (95% interval -0.00200 to 0.00400, 40 "
        "sentences), as much as dilution predicts, within the interval."
    )
    twin = prose.dilution_text(_dilution(Interval(0.001, -0.002, 0.004, 40, "sentences")), "the untrained twin")
    assert twin.startswith("**On the untrained twin, beside its verdict.** Version 3") and twin.endswith(same[-60:])
    more = prose.dilution_text(_dilution(Interval(0.01, 0.005, 0.015, 40, "sentences")))
    assert more.endswith("more than dilution predicts: far tokens gain beyond the own token's lost share.")
    less = prose.dilution_text(_dilution(Interval(-0.01, -0.015, -0.005, 40, "sentences")))
    assert less.endswith(
        "less than dilution predicts: far tokens get less than an even part of the own token's lost share."
    )
    none = _dilution(Interval(math.nan, math.nan, math.nan, 0))
    assert prose.dilution_text(none).startswith(f"No hidden token has an input token more than {C11_FAR} tokens away")


def test_locality_text_on_short_sentences():
    empty = NS(means={"lee": pd.DataFrame(columns=["layer", "near", "far", "uniform"])})
    assert prose.locality_text(empty, "lee").startswith(
        f"No hidden token of 'lee' has an input token more than {C11_FAR} tokens away"
    )


def test_crossing_text_on_pairs_or_single_sentences():
    single = prose.crossing_text(NS(pairs=0), "lee", "exact")
    assert single.startswith('The corpus `lee` holds single sentences: rerun with `corpus="lee_pairs"`')
    table = pd.DataFrame({"layer": [1, 2], "share": [0.1, 0.25], "uniform": [0.5, 0.5]})
    assert prose.crossing_text(NS(pairs=8, table=table), "lee_pairs", "exact") == (
        "**Measured (exact HTA, 8 pairs).** From layer 1 to layer 2, the other segment contributes 10.0% to 25.0% "
        "of a hidden token's attribution; uniform mixing would give 50%."
    )


def test_special_text_reads_the_last_layer_or_says_there_is_nothing():
    assert prose.special_text(NS(special_sources=None), "m").startswith("The tokenizer of m adds no special tokens")
    rows = [
        (t, 2, s, x)
        for t in ("first", "last")
        for s, x in (("itself", 0.5), ("words", 0.3), ("other special tokens", 0.2))
    ]
    rows += [("first", 1, "itself", 0.9)]  # an earlier layer: not read
    sources = pd.DataFrame(rows, columns=["target", "layer", "source", "share"])
    text = prose.special_text(NS(special_sources={}, sources=sources, names={"first": "[CLS]", "last": "[SEP]"}), "m")
    assert text.startswith(
        "In the last layer [CLS] keeps 50% of itself and takes 30% from the words and 20% from the other special "
        "token; [SEP] keeps 50%"
    )


def test_pos_text_names_the_tags_or_says_none_was_seen():
    assert (
        prose.pos_text(NS(pos_own_median_last={}))
        == "No part of speech was seen often enough in the last layer to show."
    )
    text = prose.pos_text(NS(pos_own_median_last={"NOUN": 0.4, "VERB": 0.3, "DET": 0.1, "ADP": 0.2}))
    assert (
        "keep most of their own input are NOUN (40%), VERB (30%), ADP (20%); those that keep least are DET (10%), ADP "
        "(20%), VERB (30%)." in text
    )


def test_claims_table_rows_follow_the_measurements():
    loc = _locality([0.1, 0.2], [0.01, 0.02])
    falls = prose.claims_table(_own({"lee": True}), _top(), loc, _corpus(), "m")
    assert list(falls.columns) == ["paper's claim", "m, lee (exact HTA)"]
    cells = dict(falls.itertuples(index=False))
    assert cells["own-token share decreases monotonically with depth"] == "median 40% → 35%; falls at every layer"
    assert cells["own token usually remains the top contributor"] == "65–90% of tokens per layer"
    assert (
        cells["about 30% of tokens lose that in later layers"]
        == "35% in the last layer; 30% on C10's recorded sample (exact)"
    )
    unrun = dict(prose.claims_table(_own({"lee": True}), _top(share=None), loc, _corpus(), "m").itertuples(index=False))
    assert unrun["about 30% of tokens lose that in later layers"] == (
        "35% in the last layer; C10's recorded sample not run in this build"
    )
    assert cells["long-range mixing grows with depth"] == (
        f"far share of the context beyond ±{C11_FAR}: 30.0% → 40.0%; one token beyond ±{C11_FAR}: 0.010 → 0.020"
    )
    rises = prose.claims_table(_own({"lee": False}), _top(), NS(means={"lee": pd.DataFrame()}), _corpus(), "m")
    assert dict(rises.itertuples(index=False))["own-token share decreases monotonically with depth"].endswith(
        "not at every layer"
    )
    assert len(rises) == 3  # no locality rows without near and far tokens


def test_the_stand_ins_have_the_fields_of_the_study_types():
    pairs = [
        (_exact(), study.ExactHTA),
        (_estimator(0.0), study.EstimatorError),
        (_corpus(), study.CorpusHTA),
        (_own({}), study.OwnShare),
        (_evidence(None), C10Evidence),
        (_top(), study.TopContributor),
        (_recorded([0.5], [0.5]), study.TopContributor),
        (
            NS(live_sentences=1, live_from=8, live_seed=0, eligible_max_tokens=9, eligible_covered=0.9, lengths=[]),
            study.LiveSample,
        ),
        (_locality([0.1], [0.1]), study.Locality),
        (NS(pairs=1, table=None), study.SegmentCrossing),
        (NS(special_sources=None, sources=None, names={}), study.SpecialTokens),
        (NS(pos_own_median_last={}), study.PartsOfSpeech),
        (NS(label="", robustness=(), original=None), Verdict),
    ]
    assert stand_ins_match(pairs) == []
