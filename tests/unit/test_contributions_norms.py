"""The norm measures of contributions/norms.py (norm, norm_resln, globenc, alti) on tiny models: the registry's
shape on every post-LN family and the one-line refusal on a pre-LN one, the identity model, a token no head
reads, a one-layer model against the papers' formulas written out here (read from the model's own modules and
hooks, not from the trace), and the rebuild check that refuses a registry row describing the wrong modules.
The identity and unread-token models are made with attention masks (test_contributions_attention.py)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from identifiability.base.errors import UserError
from identifiability.contributions import compute
from identifiability.contributions.norms import POST_LN_MEASURES, PostLNRequired
from identifiability.models.load import random_model
from identifiability.models.trace import tokenize, trace_sentences

from .test_contributions_attention import LONG, SHORT, assert_registry_shape, identity_trace, unread_trace

NORMS = ("norm", "norm_resln", "globenc", "alti")


@pytest.mark.parametrize("name", NORMS)
def test_every_family_gets_shares_or_a_one_line_refusal(tiny_any, name):
    tr = trace_sentences(tiny_any, [LONG], progress=False)[0]
    if tiny_any.adapter.pre_ln and name in POST_LN_MEASURES:
        with pytest.raises(PostLNRequired) as info:
            compute(tiny_any, tr, name)
        message = str(info.value)
        assert isinstance(info.value, UserError) and "\n" not in message
        assert tiny_any.adapter.family in message and name in message
        assert "norm," in message and "rollout" in message and "alti" not in message.split("use one of")[1]
        return
    c = compute(tiny_any, tr, name)
    assert_registry_shape(c, tiny_any.n_layers, tr.n_tokens)
    assert_registry_shape(compute(tiny_any, tr, name, rolled=True), tiny_any.n_layers, tr.n_tokens)


@pytest.mark.parametrize("name", NORMS)
def test_identity_attention_gives_the_identity(tiny_lm, name):
    tr = identity_trace(tiny_lm)
    c = compute(tiny_lm, tr, name)
    assert torch.allclose(c, torch.eye(tr.n_tokens, dtype=torch.float64).expand_as(c), atol=1e-12)


@pytest.mark.parametrize("name", NORMS)
def test_a_token_no_head_reads_gives_nothing_to_the_others(tiny_lm, name):
    j = 3
    tr = unread_trace(tiny_lm, j, LONG)
    c = compute(tiny_lm, tr, name)
    others = [i for i in range(tr.n_tokens) if i != j]
    assert float(c[1:, others, j].abs().max()) == 0.0


# --------------------------------------------------------------------------------------------------
# One layer, by the papers' formulas
# --------------------------------------------------------------------------------------------------


def _distinct_layernorms(model: torch.nn.Module) -> None:
    """A random model's LayerNorms are all gamma = 1, beta = 0, under which GlobEnc's second LayerNorm only
    rescales rows (GlobEnc = norm_resln) and swapping two LayerNorms changes nothing: perturb them."""
    with torch.no_grad():
        for k, p in enumerate(q for name, q in model.named_parameters() if "LayerNorm" in name):
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(k)))


@pytest.fixture(scope="module")
def one_layer():
    """A one-layer tiny BERT, its trace, and what its modules saw: x, A (H, d_s, d_s), the inputs and outputs
    of both LayerNorms (d_s, d), all float64."""
    lm = random_model("bert", seed=1, num_hidden_layers=1)
    _distinct_layernorms(lm.model)
    layer = lm.model.encoder.layer[0]
    seen = {}

    def keep(name):
        def hook(_m, inputs, output):
            seen[name + "_in"], seen[name + "_out"] = inputs[0][0].double(), output[0].double()

        return hook

    hooks = [
        layer.attention.output.LayerNorm.register_forward_hook(keep("ln1")),
        layer.output.LayerNorm.register_forward_hook(keep("ln2")),
    ]
    try:
        with torch.no_grad():
            out = lm.model(**tokenize(lm, [LONG]), output_attentions=True, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    tr = trace_sentences(lm, [LONG], progress=False)[0]
    return lm, tr, out.hidden_states[0][0].double(), out.attentions[0][0].double(), seen


def _normalised(c: torch.Tensor) -> torch.Tensor:
    return c / c.sum(-1, keepdim=True)


@torch.no_grad()
def _by_hand(lm, x, a, seen):
    """Per (i, j): Kobayashi 2020's vector, Kobayashi 2021's, GlobEnc's and ALTI's T_i(x_j), in loops."""
    n, d_v, H = a.shape[-1], lm.d_v, lm.n_heads
    layer = lm.model.encoder.layer[0]
    w_v, b_v = layer.attention.self.value.weight.double(), layer.attention.self.value.bias.double()
    w_o = layer.attention.output.dense.weight.double()
    ln1, ln2 = layer.attention.output.LayerNorm, layer.output.LayerNorm
    std1 = torch.sqrt(seen["ln1_in"].var(-1, unbiased=False) + ln1.eps)  # of the sum the LayerNorm really got
    std2 = torch.sqrt(seen["ln2_in"].var(-1, unbiased=False) + ln2.eps)
    g1, g2 = ln1.weight.double(), ln2.weight.double()
    f = []  # f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h
    for h in range(H):
        cols = slice(h * d_v, (h + 1) * d_v)
        f.append([(x[j] @ w_v[cols].T + b_v[cols]) @ w_o[:, cols].T for j in range(n)])
    attn, resln, glob = (torch.zeros(n, n, x.shape[1], dtype=torch.float64) for _ in range(3))
    for i in range(n):
        for j in range(n):
            v = sum(a[h, i, j] * f[h][j] for h in range(H))
            attn[i, j] = v
            r = v + (x[i] if i == j else 0.0)  # the residual goes to the token's own vector
            resln[i, j] = g1 * (r - r.mean()) / std1[i]
            glob[i, j] = g2 * (resln[i, j] - resln[i, j].mean()) / std2[i]
    return attn, resln, glob


def test_one_layer_norm_measures_by_hand(one_layer):
    lm, tr, x, a, seen = one_layer
    attn, resln, glob = _by_hand(lm, x, a, seen)
    assert torch.allclose(compute(lm, tr, "norm")[1], _normalised(attn.norm(dim=-1)), atol=1e-6)
    assert torch.allclose(compute(lm, tr, "norm_resln")[1], _normalised(resln.norm(dim=-1)), atol=1e-6)
    assert torch.allclose(compute(lm, tr, "globenc")[1], _normalised(glob.norm(dim=-1)), atol=1e-6)
    y = seen["ln1_out"]  # the attention block's actual output, bias terms included
    n = y.shape[0]
    alti = torch.tensor(
        [[max(0.0, float(y[i].abs().sum() - (y[i] - resln[i, j]).abs().sum())) for j in range(n)] for i in range(n)],
        dtype=torch.float64,
    )
    assert torch.allclose(compute(lm, tr, "alti")[1], _normalised(alti), atol=1e-6)
    # The four differ from one another on this layer: each check above tests its own formula.
    got = [compute(lm, tr, m)[1] for m in NORMS]
    assert min(float((p - q).abs().max()) for k, p in enumerate(got) for q in got[k + 1 :]) > 1e-4


def test_two_layers_are_rolled_out(tiny_lm):
    tr = trace_sentences(tiny_lm, [SHORT], progress=False)[0]
    resln = compute(tiny_lm, tr, "norm_resln")
    assert torch.allclose(compute(tiny_lm, tr, "norm_resln", rolled=True)[2], resln[2] @ resln[1], atol=1e-12)
    for name in ("globenc", "alti"):  # across layers already: entry 2 moves on from entry 1
        c = compute(tiny_lm, tr, name)
        assert float((c[2] - c[1]).abs().max()) > 1e-4


def test_a_row_that_reads_the_wrong_layernorm_is_refused(tiny_lm):
    model = copy.deepcopy(tiny_lm.model)
    _distinct_layernorms(model)
    lm = dataclasses.replace(tiny_lm, model=model)
    tr = trace_sentences(lm, [SHORT], progress=False)[0]
    assert_registry_shape(compute(lm, tr, "alti"), lm.n_layers, tr.n_tokens)
    a = lm.adapter
    swapped = dataclasses.replace(lm, adapter=dataclasses.replace(a, ln_attn=a.ln_ffn, ln_ffn=a.ln_attn))
    with pytest.raises(RuntimeError, match="rebuilt from its decomposed parts"):
        compute(swapped, tr, "alti")
