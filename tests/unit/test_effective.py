"""Effective attention: the definition's invariants, the batched path against a per-head reference,
padding, rank-deficient output projections, the value bias in T, the null models, the token categories and
their masses, and the head viewer."""

import dataclasses
import json

import pytest
import torch

from identifiability.base import linalg
from identifiability.charts.effective_attention import (
    VIEWER_DIGITS,
    figure1_chart,
    head_viewer,
    mass_chart,
    null_share_chart,
)
from identifiability.charts.render import spec_bytes
from identifiability.corpus import corpora, token_roles
from identifiability.corpus.corpora import load_corpus
from identifiability.effective import attention_mass as mass
from identifiability.effective import nulls
from identifiability.effective import projection as eff_attn
from identifiability.models import trace
from identifiability.models.load import random_model
from identifiability.studies.effective_attention import mass_by_category


def _transforms(tr, w_o, dtype=torch.float64):
    return tr.values.to(dtype) @ w_o.to(dtype)  # (L, H, d_s, d)


def _col_projector(t: torch.Tensor) -> torch.Tensor:
    """Projector onto col(T) for every head, from an SVD of T itself in float64: (L, H, d_s, d_s)."""
    u, s, _ = torch.linalg.svd(t.double(), full_matrices=False)
    tol = max(t.shape[-2:]) * torch.finfo(torch.float64).eps * s[..., :1]
    uk = u * (s > tol).unsqueeze(-2)
    return uk @ uk.mT


@pytest.fixture(scope="module")
def tiny_traces(tiny_lm, sentences):
    return trace.trace_sentences(tiny_lm, sentences, progress=False)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
def test_invariants(tiny_lm, tiny_traces, dtype, tol):
    w_o = trace.out_proj_weights(tiny_lm)
    d_v = tiny_lm.d_v
    assert max(tr.n_tokens for tr in tiny_traces) > d_v >= min(tr.n_tokens for tr in tiny_traces)
    for tr, eff in zip(tiny_traces, eff_attn.effective_attention(tiny_traces, w_o, dtype=dtype)):
        assert eff.effective.dtype == dtype
        t = _transforms(tr, w_o)
        a = tr.attentions.double()
        out = a @ t
        # Same head output.
        assert float((eff.effective.double() @ t - out).norm() / out.norm()) < tol
        # The null part is in LN(T) and the effective part in col(T): projecting again changes nothing.
        assert float((eff.null.double() @ t).norm() / out.norm()) < tol
        p = _col_projector(t)
        assert torch.allclose(eff.effective.double() @ p, eff.effective.double(), atol=tol * 10)
        assert torch.allclose(eff.effective + eff.null, tr.attentions.to(dtype), atol=tol)
        # dim LN(T) by rank-nullity, for random weights exactly max(d_s - d_v, 0).
        assert torch.equal(eff.null_dim, torch.full_like(eff.null_dim, max(tr.n_tokens - d_v, 0)))
        if tr.n_tokens <= d_v:  # LN(T) empty: A_eff is A itself, not A up to rounding
            assert torch.equal(eff.effective, tr.attentions.to(dtype))
            assert not eff.null.any()
        else:
            assert float(eff.null.norm()) > 1e-3  # a real null part exists


def test_projecting_twice_changes_nothing(tiny_lm, tiny_traces):
    w_o = trace.out_proj_weights(tiny_lm)
    long = max(tiny_traces, key=lambda tr: tr.n_tokens)
    eff = eff_attn.effective_attention([long], w_o, dtype=torch.float64)[0]
    again = eff_attn.effective_padded(eff.effective[None], long.values[None], [long.n_tokens], w_o, torch.float64)
    torch.testing.assert_close(again.effective[0], eff.effective, atol=1e-12, rtol=0)
    assert float(again.null.abs().max()) < 1e-12


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-6), (torch.float64, 1e-12)])
def test_batched_equals_per_head_reference(tiny_lm, tiny_traces, dtype, atol):
    """One padded SVD over all sentences, layers and heads == a Python loop of SVDs of T, head by head."""
    w_o = trace.out_proj_weights(tiny_lm)
    batched = eff_attn.effective_attention(tiny_traces, w_o, dtype=dtype)
    for tr, got in zip(tiny_traces, batched):
        ref = eff_attn.effective_loop(tr, w_o, dtype=torch.float64)
        assert torch.equal(got.rank, ref.rank)
        torch.testing.assert_close(got.effective.double(), ref.effective, atol=atol, rtol=0)


def test_padding_and_grouping_do_not_change_the_result(tiny_lm, tiny_traces):
    w_o = trace.out_proj_weights(tiny_lm)
    together = eff_attn.effective_attention(tiny_traces, w_o, dtype=torch.float64, max_cells=10**9)
    for tr, got in zip(tiny_traces, together):
        alone = eff_attn.effective_attention([tr], w_o, dtype=torch.float64)[0]
        assert got.effective.shape == (tiny_lm.n_layers, tiny_lm.n_heads, tr.n_tokens, tr.n_tokens)
        torch.testing.assert_close(got.effective, alone.effective, atol=1e-13, rtol=0)
        assert torch.equal(got.rank, alone.rank)
    # Garbage in the padded region must not leak in.
    attn, vals, lengths = eff_attn.pad_traces(tiny_traces)
    valid = torch.arange(attn.shape[-1])[None, :] < lengths[:, None]
    noisy_a = torch.where(valid[:, None, None, :, None] & valid[:, None, None, None, :], attn, torch.rand_like(attn))
    noisy_v = torch.where(valid[:, None, None, :, None], vals, 100 * torch.randn_like(vals))
    res = eff_attn.effective_padded(noisy_a, noisy_v, lengths, w_o, torch.float64)
    for b, got in enumerate(together):
        n = int(lengths[b])
        torch.testing.assert_close(res.effective[b, :, :, :n, :n], got.effective, atol=1e-13, rtol=0)
        assert not res.effective[b, :, :, n:].any() and not res.effective[b, :, :, :, n:].any()


def test_groups_respect_the_cell_budget():
    lengths = [5, 40, 7, 33, 100, 6, 41]
    groups = eff_attn.length_groups(lengths, max_cells=5000, max_batch=3)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert len(g) <= 3 and (len(g) == 1 or len(g) * max(lengths[i] for i in g) ** 2 <= 5000)


def _rank_deficient(w_o: torch.Tensor, layer: int, head: int, n_dup: int) -> torch.Tensor:
    """A copy of w_o whose block (layer, head) has rank d_v - n_dup exactly, in any precision: its last
    ``n_dup`` rows repeat its first ones. (Truncating an SVD instead leaves float32 rounding in the dropped
    directions, which a float64 decomposition with a float64 tolerance would count as rank.)"""
    w = w_o.clone()
    w[layer, head, -n_dup:] = w[layer, head, :n_dup]
    return w


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rank_deficient_output_projection(tiny_lm, tiny_traces, dtype):
    """If W_O^h is not of full rank, col(T) is smaller than col(V_h): decomposing V_h alone would keep
    a part of LN(T) in A_eff. The batched code must detect such heads and agree with an SVD of T."""
    d_v = tiny_lm.d_v
    r = d_v - 3
    w_def = _rank_deficient(trace.out_proj_weights(tiny_lm), 1, 2, d_v - r)
    w_def[0, 1] = 0.0  # a head that outputs nothing: everything is null
    _, wo_rank = eff_attn.out_proj_row_space(w_def, dtype)
    assert int(wo_rank[1, 2]) == r and int(wo_rank[0, 1]) == 0 and int(wo_rank[0, 0]) == d_v
    long = max(tiny_traces, key=lambda tr: tr.n_tokens)
    short = min(tiny_traces, key=lambda tr: tr.n_tokens)
    for tr in (long, short):
        got = eff_attn.effective_attention([tr], w_def, dtype=dtype)[0]
        ref = eff_attn.effective_loop(tr, w_def, dtype=torch.float64)
        assert torch.equal(got.rank, ref.rank)
        assert int(got.rank[1, 2]) == min(tr.n_tokens, r) and int(got.rank[0, 1]) == 0
        torch.testing.assert_close(got.effective.double(), ref.effective, atol=2e-6, rtol=0)
        assert not got.effective[0, 1].any()  # T = 0: nothing is effective
        t = _transforms(tr, w_def)
        p = _col_projector(t)
        torch.testing.assert_close(got.effective.double() @ p, got.effective.double(), atol=2e-6, rtol=0)
        torch.testing.assert_close(got.effective.double() @ t, tr.attentions.double() @ t, atol=2e-5, rtol=0)
        # The naive shortcut (col(V_h), W_O assumed full rank) is wrong for that head.
        naive = eff_attn.effective_attention([tr], None, dtype=dtype)[0]
        assert int(naive.rank[1, 2]) == min(tr.n_tokens, d_v)
        if tr.n_tokens > r:
            assert float((naive.effective[1, 2] - got.effective[1, 2]).abs().max()) > 1e-3
        # Healthy heads are unaffected by the detection.
        torch.testing.assert_close(naive.effective[1, 0], got.effective[1, 0], atol=0, rtol=0)


def test_relative_tolerance_is_what_decides_rank(tiny_lm, tiny_traces):
    """A relative tolerance of 1 keeps only directions as large as the largest; the default keeps all."""
    w_o = trace.out_proj_weights(tiny_lm)
    long = max(tiny_traces, key=lambda tr: tr.n_tokens)
    coarse = eff_attn.effective_attention([long], w_o, rtol=0.5)[0]
    default = eff_attn.effective_attention([long], w_o)[0]
    assert (coarse.rank < default.rank).all() and (default.rank == tiny_lm.d_v).all()
    assert linalg.rank_rtol(40, 32, torch.float32) == 40 * torch.finfo(torch.float32).eps


def test_pearson():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(3, 2, 7, 7, generator=g)
    b = a + 0.3 * torch.rand(3, 2, 7, 7, generator=g)
    got = eff_attn.pearson(a, b)
    import numpy as np

    want = np.corrcoef(a[1, 0].flatten().numpy(), b[1, 0].flatten().numpy())[0, 1]
    assert got.shape == (3, 2) and abs(float(got[1, 0]) - want) < 1e-6
    assert float((eff_attn.pearson(a, a) - 1).abs().max()) < 1e-12
    assert float(eff_attn.pearson(a, -a).max()) < -1 + 1e-12
    # Pearson(A, A Q Qᵀ) from A Q alone
    q, _ = torch.linalg.qr(torch.randn(3, 2, 7, 3, generator=g, dtype=torch.float64))
    proj = eff_attn.pearson_projected(a, q)
    torch.testing.assert_close(proj, eff_attn.pearson(a, a.double() @ q @ q.mT), atol=1e-12, rtol=0)
    torch.testing.assert_close(
        eff_attn.pearson_projected(a, torch.eye(7).expand(3, 2, 7, 7)), torch.ones(3, 2, dtype=torch.float64)
    )


def test_token_categories(tiny_lm):
    tok = tiny_lm.tokenizer
    ids = tok("Hello, world! It costs $5 (or so).")["input_ids"] + [tok.unk_token_id]
    cats = token_roles.token_categories(tok, ids)
    toks = tok.convert_ids_to_tokens(ids)
    assert cats[0] == token_roles.START and cats[-2] == token_roles.SEPARATOR and cats[-1] == token_roles.UNKNOWN
    for t, c in zip(toks[1:-2], cats[1:-2]):
        assert c == (token_roles.PUNCTUATION if t in {",", "!", "$", "(", ")", "."} else token_roles.OTHER), (t, c)
    labels = token_roles.category_labels(tok, [token_roles.START, token_roles.SEPARATOR, token_roles.OTHER])
    assert labels == {"start": "start ([CLS])", "separator": "separator ([SEP])", "other tokens": "other tokens"}
    assert token_roles.token_categories(tok, [tok.mask_token_id]) == [token_roles.OTHER_SPECIAL]  # special, no role
    assert token_roles.is_punctuation("Ġ,") and token_roles.is_punctuation("##.")
    assert not token_roles.is_punctuation("Ġthe")


def test_category_masses_of_raw_attention_add_up_to_the_rows(tiny_lm, tiny_traces):
    order = list(token_roles.CATEGORIES)
    for tr in tiny_traces:
        cats = token_roles.token_categories(tiny_lm.tokenizer, tr.input_ids)
        m = tr.attentions.sum(-2).double() @ mass.key_onehot(cats, order)  # mass per category, summed over rows
        # every row sums to one, so the masses summed over the rows add up to d_s
        torch.testing.assert_close(m.sum(-1), torch.full(m.shape[:2], float(tr.n_tokens), dtype=torch.float64))
        # The start token ([CLS]) is one key: its mass is the sum over queries of that column.
        torch.testing.assert_close(m[..., 0], tr.attentions[..., 0].double().sum(-1))


def test_head_viewer_ships_the_matrices(tiny_lm, tiny_traces):
    w_o = trace.out_proj_weights(tiny_lm)
    effs = eff_attn.effective_attention(tiny_traces[:2], w_o)
    chart = head_viewer([(tr.tokens, tr.attentions, e.effective) for tr, e in zip(tiny_traces, effs)])
    spec = chart.to_dict()
    assert {p["name"] for p in spec["params"]} == {"sentence", "layer", "head"}
    rows = next(iter(spec["datasets"].values()))
    L, H = tiny_lm.n_layers, tiny_lm.n_heads
    assert len(rows) == 2 * L * H
    row = next(r for r in rows if r["s"] == 1 and r["layer"] == 2 and r["head"] == 2)  # layers 1..L on the page
    n = tiny_traces[1].n_tokens
    unit = 10.0**-VIEWER_DIGITS
    raw = torch.tensor([int(x) for x in row["r"].split(",")]).reshape(n, n) * unit
    null = torch.tensor([int(x) for x in row["z"].split(",")]).reshape(n, n) * unit  # raw - effective
    eff = raw - null
    torch.testing.assert_close(raw.float(), tiny_traces[1].attentions[1, 2], atol=0.51 * unit, rtol=0)
    torch.testing.assert_close(eff.float(), effs[1].effective[1, 2], atol=0.51 * unit, rtol=0)
    assert spec_bytes(chart) < 20 * 2 * L * H * max(tr.n_tokens for tr in tiny_traces[:2]) ** 2 + 50_000
    json.dumps(spec)  # serialisable


def test_entry_points_on_every_architecture(tiny_any, sentences):
    """Every src entry point of the chapter, on every registered architecture (causal GPT-2 included)."""
    lm = tiny_any
    w_o = trace.out_proj_weights(lm)
    seen = 0
    for i, tr, eff in eff_attn.iter_effective(lm, sentences, w_o, progress=False):
        t = _transforms(tr, w_o)
        out = tr.attentions.double() @ t
        assert float((eff.effective.double() @ t - out).norm() / out.norm()) < 1e-5
        assert tr.text == sentences[i]
        assert torch.equal(eff.null_dim, (tr.n_tokens - eff.rank))
        seen += 1
    assert seen == len(sentences)
    fig = eff_attn.correlation_by_length(lm, sentences, progress=False)
    assert len(fig) == len(sentences) * lm.n_layers * lm.n_heads
    short = fig[fig.d_s <= lm.d_v]
    assert (short.pearson > 1 - 1e-9).all() and (short.null_dim == 0).all()
    assert (fig[fig.d_s > lm.d_v].null_dim > 0).all()
    assert sorted(fig.layer.unique()) == list(range(1, lm.n_layers + 1))  # the book's layers 1..L
    per_head, _ = mass.mass_tables(lm, sentences, progress=False)
    assert sorted(per_head.layer.unique()) == list(range(1, lm.n_layers + 1))
    whole = per_head[per_head.category.isin(token_roles.CATEGORIES)]
    totals = whole.groupby(["text", "layer", "head"]).raw.sum() / whole.groupby(["text", "layer", "head"]).d_s.first()
    assert ((totals - 1).abs() < 1e-5).all()  # each row's mass over all categories is one
    table = mass_by_category(lm, sentences, progress=False).table
    with_twin = figure1_chart(fig, lm.d_v, twin=fig).to_dict()  # the twin's median beside the model's, dashed
    twin_rows = [r for r in with_twin["datasets"][next(iter(with_twin["datasets"]))] if r["curve"].startswith("untr")]
    assert len(twin_rows) == fig.d_s.nunique() and "untrained twin" in with_twin["title"][0]
    for chart in (
        figure1_chart(fig, lm.d_v),
        null_share_chart(fig, lm.d_v),
        mass_chart(table, {c: c for c in sorted(set(table.category))}),
    ):
        assert chart.to_dict()
    trs = trace.trace_sentences(lm, sentences[:2], progress=False)
    effs = eff_attn.effective_attention(trs, w_o)
    assert spec_bytes(head_viewer([(tr.tokens, tr.attentions, e.effective) for tr, e in zip(trs, effs)])) > 0


def test_long_texts_and_length_grid(tiny_lm):
    corpus = load_corpus("lee")
    texts = corpora.long_texts(corpus, tiny_lm.tokenizer, 5, 20, 40, seed=0)
    lengths = [len(tiny_lm.tokenizer(t)["input_ids"]) for t in texts]
    assert len(texts) == 5 and all(20 <= n <= 40 for n in lengths)
    # Too few corpus sentences that long: topped up with concatenations.
    texts = corpora.long_texts(corpus, tiny_lm.tokenizer, 3, 300, 320, seed=0)
    assert len(texts) == 3 and all(250 <= len(tiny_lm.tokenizer(t)["input_ids"]) <= 320 for t in texts)
    grid = eff_attn.length_grid(32, 384, 12)
    assert grid[0] == 4 and grid[-1] == 384 and {31, 32, 33, 34} <= set(grid)


def test_random_projection_is_a_projection_of_the_right_rank():
    g = torch.Generator().manual_seed(0)
    a = torch.softmax(torch.randn(2, 3, 10, 10, generator=g, dtype=torch.float64), -1)
    rank = torch.tensor([[4, 10, 1], [7, 2, 5]])
    p = nulls.random_projection(a, rank, seed=1)
    torch.testing.assert_close(nulls.random_projection(p, rank, seed=1), p)  # same subspace: idempotent
    assert (torch.linalg.matrix_rank(p) == torch.minimum(rank, torch.tensor(10))).all()
    torch.testing.assert_close(p[0, 1], a[0, 1])  # full rank: A itself
    assert not torch.allclose(nulls.random_projection(a, rank, seed=2), p)  # another seed, another subspace


def test_random_subspace_is_uniform():
    """The n x r Gaussian's QR gives a uniformly random subspace: the projector's expected diagonal is r / n
    in every coordinate (a basis biased towards some axes would not average out)."""
    n, r = 12, 3
    eye = torch.eye(n, dtype=torch.float64).expand(4000, n, n)
    proj = nulls.random_projection(eye, torch.full((4000,), r), seed=0)  # I Q Qᵀ = the projector itself
    diag = proj.diagonal(dim1=-2, dim2=-1).mean(0)
    assert float((diag - r / n).abs().max()) < 0.02


def test_value_bias_is_read_from_the_value_map_and_inputs_rebuild_the_values(tiny_any, sentences):
    """b_V is the value map of a zero input, E is what the value map reads: the value map applied to
    value_inputs gives the trace's V_h = E W_V + b_V, for every family (pre-LN and fused q/k/v included)."""
    lm = tiny_any
    a = lm.adapter
    b = nulls.value_bias(lm)
    assert b.shape == (lm.n_layers, lm.n_heads, lm.d_v)
    tr = trace.trace_batch(lm, sentences[:1])[0]
    e = nulls.value_inputs(lm, tr)
    with torch.no_grad():
        for layer, m in enumerate(a.layer_modules(lm.model, a.value, lm.n_layers)):
            v = a.split_values(m(e[layer][None].to(a.weight(m).dtype)), lm.n_heads)[0]
            torch.testing.assert_close(v, tr.values[layer], atol=1e-5, rtol=1e-4)


@pytest.fixture(scope="module")
def biased_lm():
    """A tiny BERT whose value biases are not zero (a random init sets them to zero)."""
    lm = random_model("bert", seed=0)
    with torch.no_grad():
        for m in lm.adapter.layer_modules(lm.model, lm.adapter.value, lm.n_layers):
            m.bias.normal_(0, 1.0)
    return lm


def test_value_bias_changes_a_eff_but_not_ln_t1(biased_lm, sentences):
    """T with the bias gives A_eff T = A T for the head's real output; without it A_eff moves, keeps
    A_eff T0 = A T0 for T0 = E W_V W_O, but no longer gives the real output. LN([T, 1]), chapter 2's null
    space, is the same either way (the bias adds multiples of 1 to V_h's columns)."""
    lm = biased_lm
    w_o = trace.out_proj_weights(lm)
    b = nulls.value_bias(lm)
    long = [s for s in sentences if len(lm.tokenizer(s)["input_ids"]) > lm.d_v][:1]
    ((_, tr, with_b),) = eff_attn.iter_effective(lm, long, w_o, dtype=torch.float64, progress=False)
    ((_, tr0, without),) = eff_attn.iter_effective(lm, long, w_o, torch.float64, progress=False, value_bias=False)
    torch.testing.assert_close(tr0.values, nulls.without_value_bias(tr.values, b))
    t, t0 = _transforms(tr, w_o), _transforms(tr0, w_o)
    out, out0 = tr.attentions.double() @ t, tr.attentions.double() @ t0
    assert float((with_b.effective.double() @ t - out).norm() / out.norm()) < 1e-5
    assert float((without.effective.double() @ t0 - out0).norm() / out0.norm()) < 1e-5
    assert float((without.effective.double() @ t - out).norm() / out.norm()) > 1e-3
    assert float((without.effective - with_b.effective).norm()) > 1e-3
    ones = torch.ones(*t.shape[:-1], 1, dtype=torch.float64)
    torch.testing.assert_close(_col_projector(torch.cat([t, ones], -1)), _col_projector(torch.cat([t0, ones], -1)))


def test_random_value_weights_null(tiny_lm, sentences):
    """Random value weights on the same inputs: T = E W_V W_O of full rank min(d_s, d_v), so the same null-space
    dimension as the model, and col(T) = col(E W_V) (W_O has full rank): the QR basis of value_basis gives the
    effective attention of T itself. Seeded, and another seed gives another map."""
    lm = tiny_lm
    w_v, w_o = nulls.random_value_weights(lm, seed=0)
    assert w_v.shape == (lm.n_layers, lm.n_heads, lm.d_model, lm.d_v)
    assert w_o.shape == (lm.n_layers, lm.n_heads, lm.d_v, lm.d_model)
    assert torch.equal(nulls.random_value_weights(lm, seed=0)[0], w_v)
    assert not torch.equal(nulls.random_value_weights(lm, seed=1)[0], w_v)
    tr = max(trace.trace_sentences(lm, sentences, progress=False), key=lambda x: x.n_tokens)
    v = nulls.random_values(nulls.value_inputs(lm, tr), w_v)
    eff = eff_attn.effective_attention([dataclasses.replace(tr, values=v)], w_o, torch.float64)[0]
    assert (eff.rank == min(tr.n_tokens, lm.d_v)).all()
    t = v.double() @ w_o.double()
    a = tr.attentions.double()
    assert float((eff.effective.double() @ t - a @ t).norm() / (a @ t).norm()) < 1e-10
    q = nulls.value_basis(nulls.value_inputs(lm, tr), w_v)
    assert q.shape[-1] == min(tr.n_tokens, lm.d_v)
    torch.testing.assert_close(eff_attn.pearson_projected(a, q), eff_attn.pearson(a, eff.effective), atol=1e-10, rtol=0)


def test_null_model_columns_and_mass_tables(tiny_lm, sentences):
    fig = eff_attn.correlation_by_length(tiny_lm, sentences, progress=False)
    short = fig[fig.d_s <= tiny_lm.d_v]
    # no null space: both null models are the identity too
    assert (short.pearson_random > 1 - 1e-9).all() and (short.pearson_random_weights > 1 - 1e-9).all()
    assert (fig[fig.d_s > tiny_lm.d_v].pearson_random < 1 - 1e-6).all()
    assert (fig[fig.d_s > tiny_lm.d_v].pearson_random_weights < 1 - 1e-6).all()
    per_head, normalised = mass.mass_tables(tiny_lm, sentences, progress=False)
    assert set(normalised.category) == set(token_roles.STRUCTURAL) and len(normalised) == 2 * len(sentences)
    # the summed masses of short sentences (no null space) agree in all three matrices
    short_texts = [i for i, s in enumerate(sentences) if len(tiny_lm.tokenizer(s)["input_ids"]) <= tiny_lm.d_v]
    s = per_head[per_head.text.isin(short_texts)]
    assert len(s) and ((s.effective - s.raw).abs() < 1e-5).all() and ((s.random - s.raw).abs() < 1e-5).all()


def test_separators_by_place_split_the_separator_category(tiny_lm):
    """On a pair, the masses on the middle and the end separator add up to the separator category's mass;
    a single sentence has an end separator only."""
    text = ["The cat sat on the mat and looked at the birds outside. ||| It was a quiet and sunny morning."]
    per_head, _ = mass.mass_tables(tiny_lm, text, progress=False)
    by = per_head.set_index(["category", "layer", "head"]).sort_index()
    for k in ("raw", "effective", "random"):
        both = by.loc[mass.END_SEPARATOR, k] + by.loc[mass.MIDDLE_SEPARATOR, k]
        assert both.tolist() == pytest.approx(by.loc[token_roles.SEPARATOR, k].tolist(), rel=1e-9, abs=1e-12)
    keys = per_head.groupby("category")["keys"].first()
    assert keys[mass.MIDDLE_SEPARATOR] == keys[mass.END_SEPARATOR] == 1 and keys[token_roles.SEPARATOR] == 2
    single, _ = mass.mass_tables(tiny_lm, ["A single sentence here."], progress=False)
    assert mass.END_SEPARATOR in set(single.category) and mass.MIDDLE_SEPARATOR not in set(single.category)
    cats = ["start", "other tokens", "separator", "separator", "other tokens", "separator"]
    assert mass.separator_positions(cats)[2:] == ["middle separator", "middle separator", "other tokens",
                                                      "end separator"]  # fmt: skip


def test_head_accessor_numbers_layers_from_one(tiny_lm):
    from identifiability.models.trace import head, head_transforms, out_proj_weights, trace_batch

    tr = trace_batch(tiny_lm, ["a short sentence for one head"])[0]
    w_o = out_proj_weights(tiny_lm)
    A, T = head(tr, w_o, 1, 0)
    assert torch.equal(A, tr.attentions[0, 0])
    assert torch.allclose(T, head_transforms(tr, w_o)[0, 0])
    with pytest.raises(ValueError, match="layers 1..L"):
        head(tr, w_o, 0, 0)
