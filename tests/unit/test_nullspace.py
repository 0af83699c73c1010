"""Non-identifiability: null spaces, constructed alternatives, the threshold, softmax realisability.

Each test can fail: the alternatives are checked by recomputing outputs, the threshold case must admit no
move, the realisability test must both accept and reject, and the search is verified by recomputing softmax.
"""

import math

import pytest
import torch

from identifiability import nullspace as ns
from identifiability.models import trace


def _softmax_head(S: int, d_v: int, d_q: int, seed: int = 0, scale: float = 1.0):
    """A random strictly positive softmax attention (rank-d_q logits) and a random T of rank d_v."""
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(S, d_q, generator=g, dtype=torch.float64)
    k = scale * torch.randn(S, d_q, generator=g, dtype=torch.float64)
    a, _ = ns.attention_from_factors(q, k)
    t = torch.randn(S, d_v, generator=g, dtype=torch.float64) @ torch.randn(
        d_v, 3 * d_v, generator=g, dtype=torch.float64
    )
    return a, t, q, k


# ------------------------------------------------------------------------------------------------ helpers


def test_parse_lengths_in_units_of_dv():
    assert ns.parse_lengths("8, dv, dv+1, dv-8, 2dv, 3dv+2", 32, max_len=90) == [8, 24, 32, 33, 64, 90]
    assert ns.parse_lengths([5, "dv+2"], 16) == [5, 18]
    with pytest.raises(ValueError, match="dv"):
        ns.parse_lengths("ten", 32)


def test_float64_context_restores_dtype(tiny_lm, sentences):
    with ns.float64(tiny_lm):
        tr = trace.trace_batch(tiny_lm, sentences[:1])[0]
    assert tr.attentions.dtype == torch.float64 and tr.values.dtype == torch.float64
    assert next(tiny_lm.model.parameters()).dtype == torch.float32


# ------------------------------------------------------------------------------------------- 1. dimensions


def test_reduced_spectra_equal_direct_svd():
    """head_spectra's orthogonal reduction must give exactly the singular values of T and [T, c1]."""
    g = torch.Generator().manual_seed(1)
    for S in (5, 12, 13, 40):
        v = torch.randn(3, S, 12, generator=g, dtype=torch.float64)
        w = torch.randn(3, 12, 48, generator=g, dtype=torch.float64)
        s_t, s_t1, c = ns.head_spectra(v, w)
        t = v @ w
        direct = torch.linalg.svdvals(t)[..., : min(S, 12)]
        torch.testing.assert_close(s_t, direct, rtol=1e-10, atol=1e-10 * float(direct.max()))
        aug = torch.cat([t, c[:, None, None] * torch.ones(3, S, 1, dtype=t.dtype)], -1)
        direct1 = torch.linalg.svdvals(aug)[..., : s_t1.shape[-1]]
        torch.testing.assert_close(s_t1, direct1, rtol=1e-10, atol=1e-10 * float(direct1.max()))


def test_null_space_dimension_at_least_rank_nullity(tiny_lm, sentences):
    with ns.float64(tiny_lm):
        trs = trace.trace_sentences(tiny_lm, sentences, progress=False)
    w_o = trace.out_proj_weights(tiny_lm).double()
    df = ns.null_space_table(trs, w_o, progress=False)
    assert sorted(df.layer.unique()) == list(range(1, tiny_lm.n_layers + 1))  # the book's layers 1..L
    assert (df.dim_LN_T >= df.d_s - df.rank_T).all()  # by definition
    assert (df.dim_LN_T >= df.bound_T).all() and (df.dim_LN_T1 >= df.bound_T1).all()  # rank-nullity
    assert (df.rank_T <= tiny_lm.d_v).all()
    # generic random heads have full rank, and a clear gap around the tolerance
    assert (df.rank_T == df.d_s.clip(upper=tiny_lm.d_v)).all()
    long = df[df.d_s > tiny_lm.d_v]
    assert len(long) and (long.dropped_max_T < 1e-13).all() and (df.kept_min_T > 1e-8).all()


def test_rank_deficient_T_has_larger_null_space():
    # two identical rows of T: a key duplicated (same value vector) adds a null direction
    g = torch.Generator().manual_seed(3)
    t = torch.randn(6, 8, generator=g, dtype=torch.float64)
    t[5] = t[4]
    assert ns.left_null_basis(t, augmented=False).shape[1] == 1  # d_s = 6 < d_v = 8, still one direction
    nb = ns.left_null_basis(t)
    assert nb.shape[1] == 1
    assert torch.allclose(nb[:, 0].abs(), torch.tensor([0, 0, 0, 0, 1, 1], dtype=t.dtype) / math.sqrt(2), atol=1e-12)


# ------------------------------------------------------------------------------------ 2. alternatives


@pytest.mark.parametrize("S", [10, 24])
def test_constructed_alternative_keeps_output(S):
    a, t, *_ = _softmax_head(S, d_v=6, d_q=6, seed=S)
    for alt in (ns.construct_alternative(a, t, seed=1)[0], ns.max_tv_alternative(a, t)[0]):
        v = ns.verify_alternative(a, alt, t)
        assert v["row_sum_max_error"] < 1e-13
        assert v["min_entry"] >= 0
        assert v["rel_output_error"] <= ns.OUTPUT_TOL
        assert v["tv_mean"] > 1e-3  # it really is different
    # and a perturbation *outside* the null space does change the output (the check can fail)
    bad = a.clone()
    bad[0, :2] += torch.tensor([0.01, -0.01], dtype=a.dtype)
    assert ns.verify_alternative(a, bad, t)["rel_output_error"] > 1e-6


def test_max_tv_is_at_least_as_far_as_its_start():
    a, t, *_ = _softmax_head(20, d_v=5, d_q=5, seed=4)
    me = ns.max_entropy_alternative(a, t, d_q=5)
    _, tv = ns.max_tv_alternative(a, t, rounds=1, starts=[me["a_alt"] > a], top_start=False)
    assert (tv >= ns.tv_rows(a, me["a_alt"]) - 1e-9).all()


def test_causal_alternatives_respect_the_mask():
    S, d_v = 14, 4
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(S, d_v, generator=g, dtype=torch.float64), torch.randn(S, d_v, generator=g, dtype=torch.float64)
    a, _ = ns.attention_from_factors(q, k, causal=True)
    t = torch.randn(S, 12, generator=g, dtype=torch.float64)[:, :d_v] @ torch.randn(
        d_v, 12, generator=g, dtype=torch.float64
    )
    vis = ns.visible_mask(S, True)
    for alt in (ns.construct_alternative(a, t, vis)[0], ns.max_tv_alternative(a, t, vis)[0]):
        assert (alt[~vis] == 0).all()
        v = ns.verify_alternative(a, alt, t)
        assert v["rel_output_error"] <= ns.OUTPUT_TOL and v["min_entry"] >= 0
        # rows that see at most d_v + 1 keys cannot move; later rows can
        tv = ns.tv_rows(a, alt)
        assert tv[: d_v + 1].max() < 1e-12 and tv[d_v + 2 :].max() > 1e-4
    assert ns.realisability(a, d_v, causal=True).realisable is None


# ---------------------------------------------------------------------------------------- 3. threshold


def test_exact_threshold_examples():
    ex = ns.exact_threshold_examples()
    assert ex["generic"]["unique"] and ex["generic"]["free_parameters"] == 0
    assert ex["generic"]["x_dot_1"][0] != 0
    assert ex["deficient"]["rank_T"] == 1 and ex["deficient"]["free_parameters"] == 3


def test_d_s_equal_d_v_plus_one_admits_no_perturbation():
    d_v = 6
    a, t, *_ = _softmax_head(d_v + 1, d_v=d_v, d_q=d_v, seed=7)
    assert ns.left_null_basis(t).shape[1] == 0
    assert ns.left_null_basis(t, augmented=False).shape[1] == 1
    alt, step = ns.construct_alternative(a, t)
    assert (step == 0).all() and torch.equal(alt, a)
    _, tv = ns.max_tv_alternative(a, t)
    assert float(tv.max()) == 0.0
    me = ns.max_entropy_alternative(a, t, d_q=d_v)
    assert float(ns.tv_rows(a, me["a_alt"]).max()) < 1e-9
    # one token more and the move is non-zero
    a2, t2, *_ = _softmax_head(d_v + 2, d_v=d_v, d_q=d_v, seed=7)
    assert float(ns.max_tv_alternative(a2, t2)[1].max()) > 1e-3


# ------------------------------------------------------------------------------------ 4. realisability


def test_realisability_accepts_low_rank_softmax_and_rejects_perturbed():
    a, t, q, k = _softmax_head(16, d_v=4, d_q=4, seed=8)
    r = ns.realisability(a, d_q=4)
    assert r.realisable and r.rank == 4
    assert not ns.realisability(a, d_q=3).realisable  # too narrow
    b, _ = ns.construct_alternative(a, t, seed=0)
    mid = a + 0.5 * (b - a)  # strictly positive, same output, generic
    r2 = ns.realisability(mid, d_q=4)
    assert r2.realisable is False and r2.rank > 4
    assert ns.realisability(b, d_q=4).realisable is False  # has exact zeros
    # factoring recovers A exactly
    q2, k2 = ns.factor_attention(a, 4)
    torch.testing.assert_close(ns.attention_from_factors(q2, k2)[0], a, rtol=0, atol=1e-12)


def test_max_entropy_alternative_is_realisable_and_keeps_output():
    a, t, *_ = _softmax_head(30, d_v=5, d_q=5, seed=9, scale=1.5)
    me = ns.max_entropy_alternative(a, t, d_q=5)
    assert ns.rel_output_error(a, me["a_alt"], t) < 1e-10
    assert float(ns.tv_rows(a, me["a_alt"]).mean()) > 1e-3
    assert ns.realisability(me["a_alt"], d_q=5).realisable
    # maximum entropy: no row has less entropy than A's row with the same output
    ent = lambda p: -(p * p.log()).sum(-1)  # noqa: E731
    assert (ent(me["a_alt"]) >= ent(a) - 1e-10).all()


def test_search_result_is_verified_by_recomputation():
    a, t, *_ = _softmax_head(24, d_v=4, d_q=4, seed=10, scale=1.5)
    res = ns.search_realisable(a, t, d_q=4, steps=15)
    alt, lp = ns.attention_from_factors(res.q, res.k)  # recompute from the returned factors
    torch.testing.assert_close(alt, res.a_alt, rtol=0, atol=1e-14)
    assert ns.rel_output_error(a, alt, t) <= ns.SEARCH_TOL
    assert abs(float(ns.tv_rows(a, alt).mean()) - res.tv_mean) < 1e-12
    assert res.tv_mean >= res.start_tv_mean - 1e-12 and res.tv_mean > 1e-3
    assert ns.realisability(d_q=4, log_probs=lp).realisable
    torch.testing.assert_close(alt.sum(1), torch.ones(24, dtype=alt.dtype))


def test_search_finds_nothing_at_threshold():
    a, t, *_ = _softmax_head(5, d_v=4, d_q=4, seed=11)
    res = ns.search_realisable(a, t, d_q=4, steps=5)
    assert res.tv_max < 1e-8


def test_dimension_count_and_local_measurement():
    assert ns.expected_dimension(33, 32, 33) == 0
    assert ns.expected_dimension(34, 32, 33) == 32
    assert ns.expected_dimension(40, 32, 33) == 32 * 7
    assert ns.expected_dimension(20, 32, 21) == 0
    d_q = 3
    for S in (d_q + 1, d_q + 2, d_q + 4):
        a, t, *_ = _softmax_head(S, d_v=d_q, d_q=d_q, seed=S)
        loc = ns.local_solution_dimension(a, t, d_q)
        assert loc["full_row_rank"]
        assert loc["dimension"] == ns.expected_dimension(S, d_q, d_q + 1) == d_q * (S - d_q - 1)


# ---------------------------------------------------------------------------------- every architecture


def test_entry_points_on_every_architecture(tiny_any, sentences):
    lm = tiny_any
    with ns.float64(lm):
        tr = trace.trace_batch(lm, [sentences[1]])[0]
    w_o = trace.out_proj_weights(lm).double()
    causal = lm.adapter.causal
    S, d_q = tr.n_tokens, lm.d_v
    assert S >= d_q + 2  # the long test sentence exceeds the tiny models' head width
    df = ns.null_space_table([tr], w_o, progress=False)
    assert (df.dim_LN_T1 >= df.bound_T1).all()
    survey = ns.head_survey(tr.attentions[:1, :2], tr.values[:1, :2], w_o[:1, :2], d_q, causal, progress=False)
    assert (survey.lp_error < 1e-10).all() and (survey.me_error < 1e-10).all()
    margins = ns.threshold_margins(tr.values[:1, :, : d_q + 1], w_o[:1])
    assert (margins.rank_T1 == d_q + 1).all()
    a = tr.attentions[0, 0]
    t = tr.values[0, 0] @ w_o[0, 0]
    vis = ns.visible_mask(S, True) if causal else None
    alt, _ = ns.construct_alternative(a, t, vis)
    assert ns.verify_alternative(a, alt, t)["rel_output_error"] <= ns.OUTPUT_TOL
    real = ns.realisability(a, d_q, causal=causal)
    assert real.realisable is (None if causal else True)
    table, _ = ns.search_by_length([tr], w_o, [(1, 0)], d_q, causal, steps=2, jacobian_max_length=0, progress=False)
    assert (table.search_error <= ns.SEARCH_TOL).all() and (table.me_error <= ns.SEARCH_TOL).all()


def test_layer_numbers_map_to_indices_in_one_place_and_t_is_formed_there(tiny_lm):
    from identifiability.models.trace import head, layer_index, out_proj_weights, trace_batch, transform

    tr = trace_batch(tiny_lm, ["a short sentence here"])[0]
    w_o = out_proj_weights(tiny_lm)
    L = tiny_lm.n_layers
    assert [layer_index(k, L) for k in range(1, L + 1)] == list(range(L))
    for bad in (0, L + 1):
        with pytest.raises(ValueError, match="1..L"):
            layer_index(bad, L)
    a, t = head(tr, w_o, L, 1)
    assert torch.equal(a, tr.attentions[L - 1, 1])
    assert torch.allclose(t, tr.values[L - 1, 1] @ w_o[L - 1, 1])
    assert torch.allclose(transform(tr.values, w_o)[L - 1, 1], t)
