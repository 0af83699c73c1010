"""Controls for C4, C5 and C18 whose truth is known by construction, run through the computation the chapter
runs: synthetic heads go through the batched decomposition (effective_padded), the measures of Figure 1 (a) and
the attention masses (head_correlations, mass_rows, with the random-subspace null), the study's evidence
(c4_evidence, c5_category) and the verdicts (the entry points c4, c5 and c18, judge_c4, judge_c5, judge_c18); a
tiny random model goes through the chapter's studies themselves. Each branch of a rule also has a control built
from intervals placed on either side of its thresholds.

- C4 must fail where every attention row lies in col(T): then A_eff = A at every length.
- C4 must hold where the attention has a sink on a token whose value vector is small: beyond d_v that sink
  lies ever more in LN(T) as d_s grows, and more than a random subspace of the same rank would put there.
- C4 partly holds where the decrease holds but the curve lies above its random-subspace null.
- C5 (version 4) must hold for a separator sink whose direction lies in LN(T), fail for one that lies in
  col(T), and be not testable, naming each separator's peak, where only the start token has a peak: that is
  C18's sink, which then holds (LN(T)) or fails (col(T)).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
import torch

from identifiability.base.digits import fmt
from identifiability.base.stats import Interval
from identifiability.corpus import token_roles
from identifiability.corpus.corpora import join_pair
from identifiability.effective import attention_mass as mass
from identifiability.effective import nulls
from identifiability.effective import projection as eff_attn
from identifiability.evidence.effective_attention import C5Category, C5Evidence, C5Original, C18Evidence
from identifiability.studies import effective_attention as S
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, PARTLY, Rules
from identifiability.verdicts.effective_attention import c4, c5, c18, judge_c4, judge_c5, judge_c18

RULE = "the rule"
RULES = Rules(RULE, RULE)  # C4 and C5 were amended: judged under the rule in force and the original
C18_RULES = Rules(RULE)  # C18 was never amended: no original rule
D_V, HEADS = 8, 4  # one layer of four heads with d_v = 8
LENGTHS = [4, 6, 8, 10, 12, 16, 24, 32, 48]  # three at or below d_v, six beyond
REPEATS = 4


def _effective(a: torch.Tensor, v: torch.Tensor) -> eff_attn.Effective:
    """The chapter's batched decomposition of one synthetic input: a (1, H, n, n), v (1, H, n, d_v)."""
    res = eff_attn.effective_padded(a[None], v[None], [a.shape[-1]], dtype=torch.float64)
    return eff_attn.Effective(res.effective[0], res.null[0], res.rank[0])


def _c4_table(make) -> pd.DataFrame:
    """Figure 1 (a)'s table of synthetic inputs: ``make(n, g)`` returns (A, V_h) of shape (1, H, n, n) and
    (1, H, n, d_v); the random value weights' values are Gaussian, as E W with random W is (their basis: QR)."""
    rows, i = [], 0
    for n in LENGTHS:
        for _ in range(REPEATS):
            g = torch.Generator().manual_seed(1000 + i)
            a, v = make(n, g)
            rw, _ = torch.linalg.qr(torch.randn(1, HEADS, n, D_V, generator=g, dtype=torch.float64))
            rows.append(
                eff_attn.head_rows(i, eff_attn.head_correlations(a, _effective(a, v), rw, seed=i)).assign(d_s=n)
            )
            i += 1
    return pd.concat(rows, ignore_index=True)


def _rows_in_col_t(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Every row of A mixes d_v prototype rows M (d_v x n, row-stochastic) and V_h = Mᵀ: col(T) = col(Mᵀ)
    holds every row of A, so A_eff = A whatever d_s."""
    m = torch.softmax(torch.randn(1, HEADS, D_V, n, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(1, HEADS, n, D_V, generator=g, dtype=torch.float64), -1)
    return p @ m, m.mT


def _sink_in_null(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """30% of every row on token 0, whose value vector is a twentieth of the others': V_h is generic (A_eff = A
    up to d_v), and beyond d_v the share of the sink's direction that col(T) keeps (its leverage, about
    (1/20)^2 d_v / d_s) shrinks as d_s grows, faster than a random subspace's (d_v / d_s)."""
    a = 0.7 * torch.softmax(3 * torch.randn(1, HEADS, n, n, generator=g, dtype=torch.float64), -1)
    a[..., 0] += 0.3
    v = torch.randn(1, HEADS, n, D_V, generator=g, dtype=torch.float64)
    v[..., 0, :] *= 0.05
    return a, v


def test_c4_fails_where_attention_lies_in_col_t():
    table = _c4_table(_rows_in_col_t)
    assert (table.pearson > 1 - 1e-9).all() and (table[table.d_s > D_V].pearson_random < 1 - 1e-3).all()
    e = S.c4_evidence(table, D_V)
    assert e.identical_at_or_below_dv and not e.diverges
    v = c4(e, RULES)
    assert v.verdict == FAILS and v.parts[0].verdict == FAILS and "nothing decorrelates" in v.parts[0].reason
    assert dict(v.robustness) == {"threshold": FAILS, "null": FAILS, "unit": FAILS}


def test_c4_holds_where_a_sink_in_ln_t_grows_with_d_s():
    table = _c4_table(_sink_in_null)
    e = S.c4_evidence(table, D_V)
    assert e.identical_at_or_below_dv and e.diverges
    assert e.trend.high < 0 and e.beyond.high < 0 and e.beyond_random_weights.high < 0
    v = c4(e, RULES)
    assert v.verdict == HOLDS and dict(v.robustness) == {"threshold": HOLDS, "null": HOLDS, "unit": HOLDS}
    assert v.original.claim == "C4"


def test_c4_precondition_is_checked_where_ln_t_is_empty():
    """One head at d_s = d_v with a rank-deficient V_h: its LN(T) is not empty, so A_eff rightly differs from A
    there. Version 3 of the rule leaves it out of the check (and counts it); version 2 failed C4 on it."""

    def deficient_at_dv(n, g):
        a, v = _sink_in_null(n, g)
        if n == D_V:
            v[0, 0, 1] = v[0, 0, 2]  # two equal rows: rank d_v - 1 at d_s = d_v
        return a, v

    e = S.c4_evidence(_c4_table(deficient_at_dv), D_V)
    assert e.identical_at_or_below_dv and e.deficient_at_or_below_dv >= 1 and e.identical_below_dv
    assert c4(e, RULES).verdict == HOLDS
    # a head with an empty LN(T) whose A_eff differed from A would be a broken construction: the part fails
    broken = replace(e, identical_at_or_below_dv=False, min_at_or_below_dv=0.99)
    v = c4(broken, RULES)
    assert v.verdict == FAILS and "empty LN(T) at d_s <= d_v" in v.parts[0].reason


# --------------------------------------------------------------------------------------------------
# C5
# --------------------------------------------------------------------------------------------------


def _c5_evidence(sink: int, in_col_t: bool, n_inputs: int = 12):
    """Sentences of 20-40 tokens: [CLS] words [SEP], with 60% of every row on token ``sink`` (0: the start
    token, -1: the end separator). ``in_col_t``: the sink's indicator vector is a column of V_h (the sink lies
    in col(T)); else the sink's value vector is zero (it lies in LN(T))."""
    rows = []
    for i in range(n_inputs):
        g = torch.Generator().manual_seed(i)
        n = 20 + (i * 7) % 21
        a = 0.4 * torch.softmax(torch.randn(1, HEADS, n, n, generator=g, dtype=torch.float64), -1)
        a[..., sink] += 0.6
        v = torch.randn(1, HEADS, n, D_V, generator=g, dtype=torch.float64)
        v[..., sink, :] = 0.0
        if in_col_t:  # column 0 of V_h is the sink's indicator vector
            v[..., 0] = 0.0
            v[..., sink, 0] = 1.0
        eff = _effective(a, v)
        cats = [token_roles.START, *[token_roles.OTHER] * (n - 2), token_roles.SEPARATOR]
        rnd = nulls.random_projection(a, eff.rank, seed=i)
        rows.append(mass.mass_rows(i, cats, a.sum(-2), eff.effective.sum(-2), rnd.sum(-2)))
    per_head = pd.concat(rows, ignore_index=True)
    categories = ((token_roles.START, "[CLS]"), (mass.END_SEPARATOR, "[SEP]"))
    return tuple(S.c5_category(per_head, c, t) for c, t in categories)


NO_ORIGINAL = C5Original(None, None, "", None, None, None)


def test_c5_holds_for_a_separator_sink_in_ln_t():
    cats = _c5_evidence(sink=-1, in_col_t=False)
    start, end = cats
    assert end.peak > 3 > start.peak and end.ratio.high < 0.01 and end.vs_random.high < 0
    v = c5(C5Evidence(cats, NO_ORIGINAL), RULES)
    assert v.verdict == HOLDS and "end separator ([SEP])" in v.reason
    assert [name for name, _ in v.robustness] == ["peak 2x", "peak 5x", "threshold", "unit"]
    assert all(label == HOLDS for _, label in v.robustness)


def test_c5_fails_for_a_separator_sink_in_col_t():
    cats = _c5_evidence(sink=-1, in_col_t=True)
    end = cats[1]
    assert end.peak > 3 and end.ratio.low > 0.9
    v = judge_c5(cats, RULE)
    assert v.verdict == FAILS and v.estimate == pytest.approx(end.ratio.estimate)


def test_c5_is_not_testable_and_c18_judges_the_start_token_where_only_it_has_a_peak():
    """Version 3 judged the start token in C5's place ('partly holds (via the sink)'); version 4 leaves C5 not
    testable, naming the separator's peak, and C18 judges the sink: it holds where the sink lies in LN(T) and
    fails where it lies in col(T)."""
    cats = _c5_evidence(sink=0, in_col_t=False)
    assert cats[0].peak > 3 > cats[1].peak
    v = c5(C5Evidence(cats, NO_ORIGINAL), RULES)
    assert v.verdict == NOT_TESTABLE and v.qualifier == "" and v.estimate is None
    assert v.reason == (
        f"no separator has a peak of 3× the uniform share: end separator ([SEP]) gets {fmt(cats[1].peak)}× the "
        "uniform share on sentences"
    )
    assert "start" not in v.reason and "sink" not in v.reason
    s18 = c18(C18Evidence(cats), C18_RULES)
    assert s18.verdict == HOLDS and s18.reason.startswith(f"this model's sink is start ([CLS]), {fmt(cats[0].peak)}×")
    assert s18.estimate == pytest.approx(cats[0].ratio.estimate) and s18.baseline == pytest.approx(cats[0].random)
    assert s18.original is None and dict(s18.robustness) == {"peak 2x": HOLDS, "peak 5x": HOLDS, "unit": HOLDS}
    kept = _c5_evidence(sink=0, in_col_t=True)
    assert judge_c18(kept, RULE).verdict == FAILS  # the sink kept: C18 fails
    assert judge_c5(kept, RULE).verdict == NOT_TESTABLE  # and C5 still judges only [SEP], which has no peak


def test_c5_not_testable_on_a_model_with_no_peak(tiny_lm, sentences):
    """The random-init model's attention is about uniform: no special token has a peak, on sentences or pairs,
    through the chapter's own studies. C5 names each separator's peak, C18 every category's."""
    long = [s for s in sentences if len(tiny_lm.tokenizer(s)["input_ids"]) > tiny_lm.d_v]
    singles = S.mass_by_category(tiny_lm, long, progress=False)
    pairs = S.pair_separators(tiny_lm, [join_pair(long[0], long[1]), join_pair(long[1], long[0])])
    e = S.c5_evidence(singles, pairs)
    assert len(e.categories) == 3 and all(c.peak < 2 for c in e.categories)
    v = c5(e, RULES)
    start, end, middle = e.categories
    assert v.verdict == NOT_TESTABLE and v.reason.startswith("no separator has a peak of 3× the uniform share")
    assert f"end separator ([SEP]) gets {fmt(end.peak)}× the uniform share on sentences" in v.reason
    assert f"middle separator ([SEP]) gets {fmt(middle.peak)}× the uniform share on sentence pairs" in v.reason
    assert dict(v.robustness)["peak 2x"] == NOT_TESTABLE
    s18 = c18(S.c18_evidence(singles, pairs), C18_RULES)
    assert s18.verdict == NOT_TESTABLE and "so this model has no sink" in s18.reason
    assert all(f"{c.label} gets {fmt(c.peak)}× the uniform share on {c.inputs}" in s18.reason for c in e.categories)
    assert start.label in s18.reason


# --------------------------------------------------------------------------------------------------
# Every branch of C4's 'partly', C5's (version 4) and C18's rules, from intervals whose side is known
# --------------------------------------------------------------------------------------------------


def iv(est: float, low: float, high: float, n: int = 40, unit: str = "sentences") -> Interval:
    return Interval(est, low, high, n, unit)


BELOW, ABOVE, ACROSS = iv(0.2, 0.1, 0.3), iv(0.8, 0.7, 0.9), iv(0.5, 0.4, 0.6)  # against 0.5
NEG, POS, ZERO = iv(-0.2, -0.3, -0.1), iv(0.2, 0.1, 0.3), iv(0.0, -0.1, 0.1)  # against 0
# (ratio, ratio minus the random subspace's) -> the per-category verdict of C5 version 4 and C18
BRANCHES = {
    HOLDS: (BELOW, NEG),
    FAILS: (ABOVE, NEG),
    INCONCLUSIVE: (ACROSS, NEG),  # the ratio's interval contains 0.5
    PARTLY: (BELOW, POS),  # removed, but no more than a random subspace removes
}


def cat(category: str, peak: float, ratio: Interval = BELOW, vs: Interval = NEG, token: str = "") -> C5Category:
    """A category's evidence with the given peak and intervals (the same over heads)."""
    token = token or ("[CLS]" if category == "start" else "[SEP]")
    inputs = "sentence pairs" if category == "middle separator" else "sentences"
    return C5Category(category, token, category != "start", peak, ratio, vs, 0.6, ratio, vs, inputs)


def test_c4_partly_holds_where_the_decrease_ties_its_random_subspace_null():
    """The decrease holds (rank correlation below 0) but A_eff stays as correlated with A as a random subspace's
    projection (the beyond part's interval lies above 0): partly holds, as the rule says ('the first only');
    with that interval containing 0 the rule's 'inconclusive if an interval contains its threshold' wins."""
    trend = iv(-0.9, -0.95, -0.8)
    v = judge_c4(True, 1.0, True, trend, iv(0.05, 0.02, 0.08), -0.1, RULE)
    assert v.verdict == PARTLY and [p.verdict for p in v.parts] == [HOLDS, FAILS]
    assert v.estimate == trend.estimate and v.baseline == -0.1
    tie = judge_c4(True, 1.0, True, trend, iv(0.0, -0.02, 0.02), -0.1, RULE)
    assert tie.verdict == INCONCLUSIVE and [p.verdict for p in tie.parts] == [HOLDS, INCONCLUSIVE]
    assert judge_c4(True, 1.0, True, trend, iv(-0.05, -0.08, -0.02), -0.1, RULE).verdict == HOLDS


@pytest.mark.parametrize("expected", list(BRANCHES))
def test_c5_one_peaked_separator_takes_its_own_verdict(expected):
    ratio, vs = BRANCHES[expected]
    cats = [cat("start", 12.0, ABOVE, POS), cat("end separator", 4.0, ratio, vs)]
    v = judge_c5(cats, RULE)
    assert v.verdict == expected and v.estimate == ratio.estimate and v.ci95 == (ratio.low, ratio.high)
    assert v.qualifier == ("no more than a random subspace" if expected == PARTLY else "")
    assert v.reason.startswith("end separator ([SEP]), 4.00× the uniform share on sentences")
    assert all(p.claim.startswith("C5.end separator") for p in v.parts)  # the start token is never judged


def test_c5_inconclusive_where_the_ratio_is_below_but_the_null_ties():
    v = judge_c5([cat("end separator", 4.0, BELOW, ZERO)], RULE)
    assert v.verdict == INCONCLUSIVE and [p.verdict for p in v.parts] == [HOLDS, INCONCLUSIVE]
    none = judge_c5([cat("end separator", 4.0, BELOW, iv(-0.1, float("nan"), float("nan"), n=1))], RULE)
    assert none.verdict == INCONCLUSIVE  # no interval for the paired difference: nothing decided


ORDER = (HOLDS, FAILS, INCONCLUSIVE, PARTLY)


@pytest.mark.parametrize("end", ORDER)
@pytest.mark.parametrize("middle", ORDER)
def test_c5_two_peaked_separators_take_the_first_of_holds_fails_inconclusive_partly(end, middle):
    cats = [cat("end separator", 4.0, *BRANCHES[end]), cat("middle separator", 6.0, *BRANCHES[middle])]
    v = judge_c5(cats, RULE)
    first = min(end, middle, key=ORDER.index)
    assert v.verdict == first
    judged = "end separator" if end == first else "middle separator"  # the end one first where both reach it
    assert v.estimate == BRANCHES[first][0].estimate and v.reason.startswith(judged)
    assert len(v.parts) == 4 and v.parts[0].claim.startswith(f"C5.{judged}")  # both separators' parts shown


def test_c5_not_testable_without_a_separator_peak_names_each_separators_peak():
    cats = [cat("start", 12.0), cat("end separator", 0.7, ABOVE), cat("middle separator", 2.5, ABOVE)]
    v = c5(C5Evidence(tuple(cats), NO_ORIGINAL), RULES)
    assert v.verdict == NOT_TESTABLE and v.estimate is None and v.parts == ()
    assert v.reason == (
        "no separator has a peak of 3× the uniform share: end separator ([SEP]) gets 0.700× the uniform share on "
        "sentences; middle separator ([SEP]) gets 2.50× the uniform share on sentence pairs"
    )
    # the alternatives move the peak threshold: at 2x the middle separator has a peak (and its ratio fails)
    assert dict(v.robustness) == {"peak 2x": FAILS, "peak 5x": NOT_TESTABLE, "threshold": NOT_TESTABLE,
                                  "unit": NOT_TESTABLE}  # fmt: skip
    assert "no separator token" in judge_c5([cat("start", 12.0)], RULE).reason  # a tokenizer with no separator


@pytest.mark.parametrize("expected", list(BRANCHES))
def test_c18_judges_the_largest_peak_by_its_own_rule(expected):
    ratio, vs = BRANCHES[expected]
    cats = [cat("start", 12.0, ratio, vs), cat("end separator", 4.0, BELOW, NEG), cat("middle separator", 1.0)]
    v = judge_c18(cats, RULE)
    assert v.claim == "C18" and v.verdict == expected and v.estimate == ratio.estimate and v.baseline == 0.6
    assert v.qualifier == ("no more than a random subspace" if expected == PARTLY else "")
    assert v.reason.startswith("this model's sink is start ([CLS]), 12.0× the uniform share on sentences")
    assert v.estimate_of.words.startswith("effective over raw attention mass on this model's sink, start ([CLS])")
    # the sink is whichever category peaks highest: here the end separator
    moved = judge_c18([cat("start", 2.0, ABOVE), cat("end separator", 4.0, ratio, vs)], RULE)
    assert moved.verdict == expected and moved.reason.startswith("this model's sink is end separator ([SEP])")


def test_c18_inconclusive_both_ways():
    across = judge_c18([cat("start", 12.0, ACROSS, NEG)], RULE)  # the ratio's interval contains 0.5
    tie = judge_c18([cat("start", 12.0, BELOW, ZERO)], RULE)  # below 0.5, but the paired interval contains 0
    assert across.verdict == tie.verdict == INCONCLUSIVE
    assert [p.verdict for p in across.parts] == [INCONCLUSIVE, HOLDS]
    assert [p.verdict for p in tie.parts] == [HOLDS, INCONCLUSIVE]


def test_c18_not_testable_without_a_sink_names_every_peak():
    cats = (cat("start", 2.5), cat("end separator", 0.7), cat("middle separator", 1.0))
    v = c18(C18Evidence(cats), C18_RULES)
    assert v.verdict == NOT_TESTABLE and v.estimate is None and v.original is None
    assert v.reason == (
        "no special token has a peak of 3× the uniform share, so this model has no sink: start ([CLS]) gets 2.50× "
        "the uniform share on sentences; end separator ([SEP]) gets 0.700× the uniform share on sentences; middle "
        "separator ([SEP]) gets 1.00× the uniform share on sentence pairs"
    )
    # 'peak 2x': the start token is a sink at 2x (and holds); 'peak 5x' and 'unit' stay not testable
    assert dict(v.robustness) == {"peak 2x": HOLDS, "peak 5x": NOT_TESTABLE, "unit": NOT_TESTABLE}
    assert "adds no start or separator token" in judge_c18([], RULE).reason
