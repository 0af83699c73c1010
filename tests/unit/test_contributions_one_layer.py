"""The one-layer references (contributions/one_layer.py) on tiny random models: exact HTA of one layer against
reverse mode and against input-to-layer HTA at layer 1, the one-layer intervention against the input
intervention at layer 1, and a layer that is the identity read as the identity by both."""

from __future__ import annotations

import pytest
import torch

from identifiability.contributions.intervention import mean_embedding, mean_hidden, token_replacement
from identifiability.contributions.one_layer import hta_layer, intervention_layer, layer_moves
from identifiability.contributions.value_zeroing import (
    block_hidden,
    block_inputs,
    block_output,
    layer_blocks,
    sentence_inputs,
    with_hidden,
)
from identifiability.hta import hta
from identifiability.models.trace import trace_sentences

from .contributions_by_hand import check_rows

TEXT = "the cat sat on the mat today"
CORPUS = ["a dog barked at the old man twice", "rain fell on the quiet town", TEXT]


def _trace(lm, text: str = TEXT):
    return trace_sentences(lm, [text], progress=False)[0]


def test_both_references_keep_the_registry_contract_on_every_family(tiny_any):
    tr = _trace(tiny_any)
    check_rows(hta_layer(tiny_any, tr).c, tiny_any.n_layers, tr.n_tokens)
    check_rows(intervention_layer(tiny_any, tr), tiny_any.n_layers, tr.n_tokens)
    if tiny_any.adapter.causal:  # a token never sees a later one, in one layer as across layers
        assert float(hta_layer(tiny_any, tr).c.triu(1).abs().max()) < 1e-6
    else:  # (a causal model's first token sees only itself, and where every sentence starts with the same
        # token the corpus mean is that token's own state: its row moves nothing, as the input intervention's)
        means = mean_hidden(trace_sentences(tiny_any, CORPUS, progress=False))
        check_rows(intervention_layer(tiny_any, tr, means), tiny_any.n_layers, tr.n_tokens)


@pytest.mark.parametrize("method", ["folded", "generic"])
def test_one_layer_hta_equals_reverse_mode_block_by_block(tiny_lm, method):
    """Both engines (the folded pass and the generic sweep) against torch.autograd.functional.jacobian of
    each block from its input."""
    tr = _trace(tiny_lm)
    got = hta_layer(tiny_lm, tr, method=method)
    assert got.method == method
    got = got.S
    calls = block_inputs(tiny_lm, sentence_inputs(tiny_lm, tr))
    for layer, (block, (args, kwargs)) in enumerate(zip(layer_blocks(tiny_lm), calls), start=1):
        h = block_hidden(args, kwargs)[0].detach()

        def f(hh, block=block, args=args, kwargs=kwargs):
            return block_output(block(*with_hidden(args, kwargs, hh.unsqueeze(0))[0], **kwargs))[0]

        J = torch.autograd.functional.jacobian(f, h)  # (n, d, n, d): [i, a, j, b]
        expected = J.double().pow(2).sum((1, 3))
        torch.testing.assert_close(got[layer], expected, rtol=1e-4, atol=1e-8)


def test_one_layer_hta_of_layer_1_is_input_to_layer_hta_of_layer_1(tiny_lm):
    tr = _trace(tiny_lm)
    one, full = hta_layer(tiny_lm, tr), hta(tiny_lm, tr)
    assert one.method == full.method == "folded"
    torch.testing.assert_close(one.c[:2], full.c[:2], rtol=1e-5, atol=1e-8)
    # deeper, the input-to-layer Jacobian composes the layers below: the two objects part
    assert float((one.c[2] - full.c[2]).abs().max()) > 1e-3


def test_one_layer_intervention_of_layer_1_is_the_input_intervention_of_layer_1(tiny_lm):
    traces = trace_sentences(tiny_lm, CORPUS, progress=False)
    means = mean_hidden(traces)
    assert means.shape == (tiny_lm.n_layers, max(t.n_tokens for t in traces), tiny_lm.d_model)
    torch.testing.assert_close(means[0], mean_embedding(traces))  # the same replacement at layer 1
    tr = _trace(tiny_lm)
    one, full = intervention_layer(tiny_lm, tr, means), token_replacement(tiny_lm, tr, "mean", means[0])
    torch.testing.assert_close(one[:2], full[:2], rtol=1e-5, atol=1e-9)
    assert float((one[2] - full[2]).abs().max()) > 1e-3
    # the replacement at layer l is layer l - 1's mean: the hidden states the trace holds are the blocks' inputs
    calls = block_inputs(tiny_lm, sentence_inputs(tiny_lm, tr))
    for k, (args, kwargs) in enumerate(calls):
        torch.testing.assert_close(block_hidden(args, kwargs)[0], tr.hidden[k])


def test_a_layer_that_is_the_identity_has_the_identity_as_its_one_layer_references(tiny_lm, monkeypatch):
    """Block 2 patched to return its input: both one-layer references read the identity there, though the
    input-to-layer ones (which see layer 1's mixing through it) do not."""
    block = layer_blocks(tiny_lm)[1]
    monkeypatch.setattr(block, "forward", lambda *args, **kwargs: block_hidden(args, kwargs))
    tr = _trace(tiny_lm)
    eye = torch.eye(tr.n_tokens, dtype=torch.float64)
    torch.testing.assert_close(hta_layer(tiny_lm, tr, method="generic").c[2], eye, rtol=0, atol=1e-6)
    torch.testing.assert_close(intervention_layer(tiny_lm, tr)[2], eye, rtol=0, atol=1e-9)
    assert float((hta(tiny_lm, tr, method="generic").c[2] - eye).abs().max()) > 1e-2
    assert float((token_replacement(tiny_lm, tr)[2] - eye).abs().max()) > 1e-2


def test_a_layer_with_its_outputs_zeroed_mixes_nothing_on_both_engines():
    """Layer 2's attention output and FFN output projections zeroed (weights and biases): what is left is the
    residual through the two LayerNorms, which act on each token alone, so both one-layer references give
    each output token its own input token only (the identity), on the folded pass as on the generic one."""
    from identifiability.models.load import random_model

    lm = random_model("bert", seed=0)
    a = lm.adapter
    for field in (a.attn_out, a.ffn_out):
        m = a.layer_modules(lm.model, field, lm.n_layers)[1]
        torch.nn.init.zeros_(m.weight)
        torch.nn.init.zeros_(m.bias)
    tr = _trace(lm)
    eye = torch.eye(tr.n_tokens, dtype=torch.float64)
    for method in ("folded", "generic"):
        got = hta_layer(lm, tr, method=method)
        assert got.method == method
        torch.testing.assert_close(got.c[2], eye, rtol=0, atol=1e-6)
        assert float((got.c[1] - eye).abs().max()) > 1e-2  # layer 1 still mixes
    torch.testing.assert_close(intervention_layer(lm, tr)[2], eye, rtol=0, atol=1e-9)


def test_a_replacement_of_the_wrong_shape_says_what_to_pass(tiny_lm):
    tr = _trace(tiny_lm)
    with pytest.raises(ValueError, match=r"one row per layer 0\.\.L-1"):
        layer_moves(tiny_lm, tr, torch.zeros(tiny_lm.n_layers + 1, tr.n_tokens, tiny_lm.d_model))
