"""Controls for C4 and C5 whose truth is known by construction, run through the computation the chapter runs:
synthetic heads go through the batched decomposition (effective_padded), the measures of Figure 1 (a) and the
attention masses (head_correlations, mass_rows, with the random-subspace null), the study's evidence
(c4_evidence, c5_category) and the verdicts (the entry points c4 and c5, judge_c5); a tiny random model goes
through the chapter's studies themselves.

- C4 must fail where every attention row lies in col(T): then A_eff = A at every length.
- C4 must hold where the attention has a sink on a token whose value vector is small: beyond d_v that sink
  lies ever more in LN(T) as d_s grows, and more than a random subspace of the same rank would put there.
- C5 must hold for a separator sink whose direction lies in LN(T), fail for one that lies in col(T), partly
  hold through the start token where only it has a peak, and be not testable where nothing has a peak.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
import torch

from identifiability import attention_mass as mass
from identifiability import nulls, token_roles
from identifiability import projection as eff_attn
from identifiability.corpora import join_pair
from identifiability.evidence.effective_attention import C5Evidence, C5Original
from identifiability.studies import effective_attention as S
from identifiability.verdicts import FAILS, HOLDS, NOT_TESTABLE, PARTLY, Rules
from identifiability.verdicts.effective_attention import c4, c5, judge_c5

RULE = "the rule"
RULES = Rules(RULE, RULE)  # C4 and C5 were amended: judged under the rule in force and the original
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


def test_c5_partly_holds_through_the_start_token_where_only_it_has_a_peak():
    cats = _c5_evidence(sink=0, in_col_t=False)
    assert cats[0].peak > 3 > cats[1].peak
    v = judge_c5(cats, RULE)
    assert v.verdict == PARTLY and v.qualifier == "via the sink, [CLS]" and "no separator has a peak" in v.reason
    assert judge_c5(_c5_evidence(sink=0, in_col_t=True), RULE).verdict == FAILS  # the sink kept: the claim fails


def test_c5_not_testable_on_a_model_with_no_peak(tiny_lm, sentences):
    """The random-init model's attention is about uniform: no special token has a peak, on sentences or pairs,
    through the chapter's own studies."""
    long = [s for s in sentences if len(tiny_lm.tokenizer(s)["input_ids"]) > tiny_lm.d_v]
    singles = S.mass_by_category(tiny_lm, long, progress=False)
    pairs = S.pair_separators(tiny_lm, [join_pair(long[0], long[1]), join_pair(long[1], long[0])])
    e = S.c5_evidence(singles, pairs)
    assert len(e.categories) == 3 and all(c.peak < 2 for c in e.categories)
    v = c5(e, RULES)
    assert v.verdict == NOT_TESTABLE and "no special token has a peak" in v.reason
    assert dict(v.robustness)["peak 2x"] == NOT_TESTABLE
