"""The attention-weight measures of contributions/attention.py (raw, rollout, flow, effective) on tiny models:
the registry's shape on every family, the identity model, a token no head reads, a one-layer model against
the formulas written out here, and attention flow against networkx's maximum flow.

How the special models are made: the attention mask. An additive (1, 1, d_s, d_s) mask that is 0 on the
diagonal and the dtype's minimum elsewhere leaves each token only itself to attend to (A = I exactly, every
layer and head); a (1, d_s) padding-style mask with a 0 at key j stops every query, j's own included, from
reading token j (column j of every A is 0), while token j keeps its place in the sentence.
"""

from __future__ import annotations

import networkx as nx
import pytest
import torch

from identifiability.contributions import MEASURES, compute
from identifiability.contributions.attention import FLOW_SCALE
from identifiability.models.load import random_model
from identifiability.models.trace import SentenceTrace, forward, tokenize, trace_sentences

ATTENTION = ("raw", "rollout", "flow", "effective")
SHORT = "The cat sat on the mat."  # 8 tokens with [CLS] and [SEP]: d_s <= d_v = 16 on the tiny models
LONG = "The cat sat on the mat, and the dog barked twice at the postman who came by today."  # d_s > d_v


def masked_trace(lm, text: str, mask: torch.Tensor) -> SentenceTrace:
    """One sentence traced under ``mask`` (see the module docstring), built as trace_batch builds a trace."""
    enc = tokenize(lm, [text])
    enc["attention_mask"] = mask
    f = forward(lm, enc, attentions=True, values=True)
    ids = enc["input_ids"][0]
    hidden = torch.stack(f.out.hidden_states, 1)[0].clone()
    hidden[0] = f.x[0]
    return SentenceTrace(
        text=text,
        tokens=lm.tokenizer.convert_ids_to_tokens(ids.tolist()),
        input_ids=ids,
        x=f.x[0].clone(),
        hidden=hidden,
        attentions=torch.stack(f.out.attentions, 1)[0].clone(),
        values=torch.stack([lm.adapter.split_values(v, lm.n_heads) for v in f.values], 1)[0].clone(),
    )


def identity_trace(lm, text: str = SHORT) -> SentenceTrace:
    n = tokenize(lm, [text])["input_ids"].shape[1]
    mask = torch.full((n, n), torch.finfo(torch.float32).min).fill_diagonal_(0.0)[None, None]
    tr = masked_trace(lm, text, mask)
    assert torch.equal(tr.attentions, torch.eye(n).expand_as(tr.attentions))  # the construction worked
    return tr


def unread_trace(lm, j: int, text: str = SHORT) -> SentenceTrace:
    n = tokenize(lm, [text])["input_ids"].shape[1]
    mask = torch.ones(1, n, dtype=torch.long)
    mask[0, j] = 0
    tr = masked_trace(lm, text, mask)
    assert float(tr.attentions[..., j].abs().max()) == 0.0
    return tr


def assert_registry_shape(c: torch.Tensor, n_layers: int, n: int) -> None:
    assert c.dtype == torch.float64 and c.shape == (n_layers + 1, n, n)
    assert float(c.min()) >= 0.0
    assert torch.allclose(c.sum(-1), torch.ones(n_layers + 1, n, dtype=torch.float64), atol=1e-12)
    assert torch.equal(c[0], torch.eye(n, dtype=torch.float64))


@pytest.mark.parametrize("name", ATTENTION)
def test_every_family_gets_rows_that_are_shares(tiny_any, name):
    tr = trace_sentences(tiny_any, [LONG], progress=False)[0]
    c = compute(tiny_any, tr, name)
    assert_registry_shape(c, tiny_any.n_layers, tr.n_tokens)
    assert_registry_shape(compute(tiny_any, tr, name, rolled=True), tiny_any.n_layers, tr.n_tokens)
    assert MEASURES[name].kind == "attention"


@pytest.mark.parametrize("name", ATTENTION)
def test_identity_attention_gives_the_identity(tiny_lm, name):
    tr = identity_trace(tiny_lm)
    c = compute(tiny_lm, tr, name)
    eye = torch.eye(tr.n_tokens, dtype=torch.float64).expand_as(c)
    assert torch.allclose(c, eye, atol=1e-12)


@pytest.mark.parametrize("name", ATTENTION)
def test_a_token_no_head_reads_gives_nothing_to_the_others(tiny_lm, name):
    # Effective attention only on d_s <= d_v, where it is A itself: beyond d_v the projection onto col(T) can
    # move weight onto an unread token (the module docstring says so).
    j = 3
    tr = unread_trace(tiny_lm, j)
    assert tr.n_tokens <= tiny_lm.d_v
    c = compute(tiny_lm, tr, name)
    others = [i for i in range(tr.n_tokens) if i != j]
    assert float(c[1:, others, j].abs().max()) == 0.0


def test_effective_attention_is_raw_attention_up_to_d_v_tokens_but_not_beyond(tiny_lm):
    short = trace_sentences(tiny_lm, [SHORT], progress=False)[0]
    assert torch.equal(compute(tiny_lm, short, "effective"), compute(tiny_lm, short, "raw"))
    long = trace_sentences(tiny_lm, [LONG], progress=False)[0]
    assert long.n_tokens > tiny_lm.d_v
    assert float((compute(tiny_lm, long, "effective") - compute(tiny_lm, long, "raw")).abs().max()) > 1e-3


# --------------------------------------------------------------------------------------------------
# One layer, against the formulas written out
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_layer():
    lm = random_model("bert", seed=1, num_hidden_layers=1)
    enc = tokenize(lm, [LONG])
    with torch.no_grad():
        out = lm.model(**enc, output_attentions=True, output_hidden_states=True)
    tr = trace_sentences(lm, [LONG], progress=False)[0]
    return lm, tr, out.attentions[0][0].double(), out.hidden_states[0][0].double()


def _residual(a_mean: torch.Tensor) -> torch.Tensor:
    m = 0.5 * a_mean + 0.5 * torch.eye(a_mean.shape[0], dtype=torch.float64)
    return m / m.sum(-1, keepdim=True)


def test_one_layer_raw_rollout_and_flow_by_hand(one_layer):
    lm, tr, a, _ = one_layer
    n = a.shape[-1]
    a_mean = sum(a[h] for h in range(lm.n_heads)) / lm.n_heads
    assert torch.allclose(compute(lm, tr, "raw")[1], a_mean, atol=1e-7)
    m = _residual(a_mean)
    assert torch.allclose(compute(lm, tr, "rollout")[1], m, atol=1e-7)
    # One layer: the only path from input j to token i is the edge (j -> i), so the flow is its capacity.
    flow = torch.tensor([[round(float(m[i, j]) * FLOW_SCALE) for j in range(n)] for i in range(n)], dtype=torch.float64)
    assert torch.allclose(compute(lm, tr, "flow")[1], flow / flow.sum(-1, keepdim=True), atol=1e-9)


def test_one_layer_effective_attention_by_hand(one_layer):
    lm, tr, a, x = one_layer
    n, d_v = a.shape[-1], lm.d_v
    assert n > d_v  # otherwise A_eff = A and the test shows nothing
    sa = lm.model.encoder.layer[0].attention
    w_v, b_v = sa.self.value.weight.double(), sa.self.value.bias.double()
    w_o = sa.output.dense.weight.double()  # (d, H*d_v): head h reads columns h*d_v .. (h+1)*d_v
    share = torch.zeros(n, n, dtype=torch.float64)
    for h in range(lm.n_heads):
        cols = slice(h * d_v, (h + 1) * d_v)
        t = (x @ w_v[cols].T + b_v[cols]) @ w_o[:, cols].T  # (d_s, d) the head's transformed vectors
        u, s, _ = torch.linalg.svd(t, full_matrices=False)
        basis = u[:, s > 1e-6 * s[0]]  # col(T); a random head's T has rank d_v
        assert basis.shape[1] == d_v
        share += a[h] @ basis @ basis.T / lm.n_heads
    share = share.clamp(min=0)
    expected = share / share.sum(-1, keepdim=True)
    assert torch.allclose(compute(lm, tr, "effective")[1], expected, atol=1e-5)


# --------------------------------------------------------------------------------------------------
# Attention flow against networkx
# --------------------------------------------------------------------------------------------------


def test_flow_equals_networkx_maximum_flow_and_rollout_composes_layers():
    lm = random_model("bert", seed=2, num_hidden_layers=3)
    tr = trace_sentences(lm, ["A dog ran."], progress=False)[0]
    n, n_layers = tr.n_tokens, lm.n_layers
    m = [_residual(tr.attentions[k].double().mean(0)) for k in range(n_layers)]  # layer k + 1's matrix
    g = nx.DiGraph()
    for k in range(n_layers):
        for i in range(n):
            for j in range(n):
                g.add_edge((k, j), (k + 1, i), capacity=float(m[k][i, j]))
    c = compute(lm, tr, "flow")
    for layer in range(1, n_layers + 1):
        flows = torch.tensor(
            [[nx.maximum_flow_value(g, (0, j), (layer, i)) for j in range(n)] for i in range(n)], dtype=torch.float64
        )
        expected = flows / flows.sum(-1, keepdim=True)
        assert torch.allclose(c[layer], expected, atol=1e-5), layer
    # Rollout composes the layers, last layer leftmost; beyond one layer the flow differs from it.
    rolled = compute(lm, tr, "rollout")
    assert torch.allclose(rolled[n_layers], m[2] @ m[1] @ m[0], atol=1e-12)
    assert float((c[n_layers] - rolled[n_layers]).abs().max()) > 1e-3
