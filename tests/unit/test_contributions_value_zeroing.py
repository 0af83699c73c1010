"""Value Zeroing (contributions/value_zeroing.py) on tiny random models: the registry's contract, the invariants
of issue 34 item 2, and every layer against the layer written out by hand."""

from __future__ import annotations

import pytest
import torch

from identifiability.contributions import MEASURES, compute
from identifiability.contributions.value_zeroing import value_zeroing, value_zeroing_scores
from identifiability.models.load import random_model
from identifiability.models.trace import trace_sentences

from .contributions_by_hand import check_rows, forced_attention, layer_by_hand

TEXT = "The cat sat on the mat, and the dog barked."


def _trace(lm):
    return trace_sentences(lm, [TEXT], progress=False)[0]


def _by_hand(lm, tr) -> torch.Tensor:
    """Every layer's normalised Value Zeroing scores from :func:`layer_by_hand` run on the trace's hidden states of
    the layer before, zeroing one token's value row at a time: (L, n, n)."""
    n = tr.n_tokens
    out = torch.zeros(lm.n_layers, n, n, dtype=torch.float64)
    for k in range(lm.n_layers):
        orig = layer_by_hand(lm, k, tr.hidden[k])
        for j in range(n):
            alt = layer_by_hand(lm, k, tr.hidden[k], zero_value=j)
            for i in range(n):
                cos = torch.dot(alt[i], orig[i]) / (alt[i].norm() * orig[i].norm())
                out[k, i, j] = 1.0 - cos
        out[k] /= out[k].sum(-1, keepdim=True)
    return out


def test_value_zeroing_keeps_the_registry_contract_on_every_family(tiny_any):
    tr = _trace(tiny_any)
    c = compute(tiny_any, tr, "value_zeroing")
    check_rows(c, tiny_any.n_layers, tr.n_tokens)
    m = MEASURES["value_zeroing"]
    assert m.per_layer and m.kind == "intervention" and m.reference == "mohebbi2023quantifying"
    check_rows(compute(tiny_any, tr, "value_zeroing", rolled=True), tiny_any.n_layers, tr.n_tokens)
    if tiny_any.adapter.causal:  # token i never reads a later token j: zeroing v_j cannot move it
        assert float(c[1:].triu(1).abs().max()) == 0.0


def test_one_layer_model_equals_the_layer_written_out():
    lm = random_model("bert", seed=1, num_hidden_layers=1)
    tr = _trace(lm)
    torch.testing.assert_close(value_zeroing(lm, tr)[1], _by_hand(lm, tr)[0], atol=2e-5, rtol=0)


def test_every_layer_scores_its_own_block_on_its_own_input(tiny_lm):
    """The failure its users hit: identical scores at every layer (the block of layer 1 rerun each time, or
    every layer fed the same hidden states). Each layer must equal its own hand computation, and the two
    layers of the tiny model must differ."""
    tr = _trace(tiny_lm)
    c = value_zeroing(tiny_lm, tr)
    torch.testing.assert_close(c[1:], _by_hand(tiny_lm, tr), atol=2e-5, rtol=0)
    assert float((c[1] - c[2]).abs().max()) > 1e-2


def test_identity_attention_gives_the_identity(tiny_lm):
    """With A = I in every head (softmax replaced, contributions_by_hand.forced_attention), zeroing v_j moves
    token j's output only."""
    tr = _trace(tiny_lm)
    with forced_attention("identity"):
        c = value_zeroing(tiny_lm, tr)
    eye = torch.eye(tr.n_tokens, dtype=torch.float64).expand_as(c)
    torch.testing.assert_close(c, eye, atol=1e-12, rtol=0)


def test_a_token_no_head_reads_contributes_nothing_to_the_others(tiny_lm):
    tr = _trace(tiny_lm)
    j = 3
    with forced_attention("unread", column=j):
        c = value_zeroing(tiny_lm, tr)
    others = [i for i in range(tr.n_tokens) if i != j]
    assert float(c[1:, others, j].abs().max()) == 0.0
    assert float(c[1:, others].sum(-1).min()) > 0.99  # the other tokens' rows are still whole


def test_excluding_the_own_token_zeroes_the_diagonal_only(tiny_lm):
    tr = _trace(tiny_lm)
    kept, dropped = value_zeroing_scores(tiny_lm, tr), value_zeroing_scores(tiny_lm, tr, exclude_self=True)
    assert float(dropped.diagonal(dim1=-2, dim2=-1).abs().max()) == 0.0
    off = ~torch.eye(tr.n_tokens, dtype=torch.bool)
    assert torch.equal(kept[:, off], dropped[:, off])
    assert float(kept.diagonal(dim1=-2, dim2=-1).min()) > 0.0


@pytest.mark.parametrize("rolled", [False, True])
def test_rollout_composes_the_layers(tiny_lm, rolled):
    tr = _trace(tiny_lm)
    c = compute(tiny_lm, tr, "value_zeroing", rolled=rolled)
    per = value_zeroing(tiny_lm, tr)
    expected = per[2] @ per[1] if rolled else per[2]
    torch.testing.assert_close(c[2], expected)
