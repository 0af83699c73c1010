"""Token replacement (contributions/intervention.py) on tiny random models: the registry's contract, the
invariants of issue 34 item 2, a one-layer model against the layer written out by hand, both replacements."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from identifiability.base.errors import UserError
from identifiability.contributions import MEASURES, compute
from identifiability.contributions.intervention import (
    NoMaskToken,
    mask_embedding,
    mean_embedding,
    replacement_moves,
    token_replacement,
)
from identifiability.models.load import random_model
from identifiability.models.trace import trace_sentences

from .contributions_by_hand import check_rows, forced_attention, layer_by_hand

TEXT = "The cat sat on the mat, and the dog barked."


def _trace(lm, text: str = TEXT):
    return trace_sentences(lm, [text], progress=False)[0]


def test_token_replacement_keeps_the_registry_contract_on_every_family(tiny_any):
    tr = _trace(tiny_any)
    c = compute(tiny_any, tr, "intervention")
    check_rows(c, tiny_any.n_layers, tr.n_tokens)
    check_rows(token_replacement(tiny_any, tr, "mask"), tiny_any.n_layers, tr.n_tokens)
    m = MEASURES["intervention"]
    assert not m.per_layer and m.kind == "intervention" and m.reference == "li2016understanding"
    torch.testing.assert_close(compute(tiny_any, tr, "intervention", rolled=True), c)  # not rolled again
    if tiny_any.adapter.causal:  # a token never sees a later one
        assert float(c.triu(1).abs().max()) < 1e-6


def test_one_layer_model_equals_the_layer_written_out():
    """Each x_j replaced by the sentence's mean input embedding, contributions_by_hand.layer_by_hand run on
    the altered x, ||h~_i - h_i|| / ||h_i||, rows normalised; compared with entry 1."""
    lm = random_model("bert", seed=1, num_hidden_layers=1)
    tr = _trace(lm)
    x = tr.x.double()
    n = x.shape[0]
    mean = x.mean(0)
    orig = layer_by_hand(lm, 0, x)
    a = torch.zeros(n, n, dtype=torch.float64)
    for j in range(n):
        xj = x.clone()
        xj[j] = mean
        alt = layer_by_hand(lm, 0, xj)
        for i in range(n):
            a[i, j] = (alt[i] - orig[i]).norm() / orig[i].norm()
    expected = a / a.sum(-1, keepdim=True)
    torch.testing.assert_close(compute(lm, tr, "intervention")[1], expected, atol=1e-5, rtol=0)


def test_identity_attention_gives_the_identity(tiny_lm):
    """With A = I in every head (softmax replaced, contributions_by_hand.forced_attention) replacing x_j
    moves h_j only, at every layer."""
    tr = _trace(tiny_lm)
    with forced_attention("identity"):
        cs = token_replacement(tiny_lm, tr), token_replacement(tiny_lm, tr, "mask")
    for c in cs:
        torch.testing.assert_close(c, torch.eye(tr.n_tokens, dtype=torch.float64).expand_as(c), atol=1e-12, rtol=0)


def test_a_token_no_head_reads_contributes_nothing_to_the_others(tiny_lm):
    tr = _trace(tiny_lm)
    j = 3
    with forced_attention("unread", column=j):
        c = token_replacement(tiny_lm, tr)
    others = [i for i in range(tr.n_tokens) if i != j]
    assert float(c[:, others, j].abs().max()) == 0.0
    assert float(c[1:, j, j].min()) > 0.0  # token j itself still moves


def test_moves_are_relative_to_the_hidden_token_and_vanish_for_the_token_itself(tiny_lm):
    """Replacing x_j by x_j moves nothing; the raw moves at layer 0 are ||r_j - x_j|| / ||x_j|| on the
    diagonal."""
    tr = _trace(tiny_lm)
    assert float(replacement_moves(tiny_lm, tr, tr.x).abs().max()) == 0.0
    r = tr.x.mean(0)
    moves = replacement_moves(tiny_lm, tr, r)
    expected = (r - tr.x).double().norm(dim=-1) / tr.x.double().norm(dim=-1)
    torch.testing.assert_close(moves[0], torch.diag(expected), atol=1e-6, rtol=0)


def test_the_corpus_mean_is_taken_per_position_and_can_be_passed_in(tiny_lm):
    short, long_ = _trace(tiny_lm, "The cat sat."), _trace(tiny_lm)
    mean = mean_embedding([short, long_])
    assert mean.shape == (long_.n_tokens, tiny_lm.d_model)
    torch.testing.assert_close(mean[0], (short.x[0] + long_.x[0]) / 2)
    torch.testing.assert_close(mean[-1], long_.x[-1])  # only the long sentence reaches the last position
    c = token_replacement(tiny_lm, short, "mean", mean=mean)
    check_rows(c, tiny_lm.n_layers, short.n_tokens)
    # the short sentence is the long one's first 4 tokens and its "."; where the corpus mean is x_j itself,
    # replacing x_j moves nothing: a source the intervention cannot see
    assert float(c[1:, :, :4].abs().max()) == 0.0
    assert float((c - token_replacement(tiny_lm, short)).abs().max()) > 1e-3  # not the sentence's own mean


def test_the_mask_replacement_is_the_mask_tokens_embedding_at_each_position(tiny_lm):
    tr = _trace(tiny_lm)
    masked_text = " ".join([tiny_lm.tokenizer.mask_token] * (tr.n_tokens - 2))
    masked = _trace(tiny_lm, masked_text)
    assert masked.n_tokens == tr.n_tokens
    rows = mask_embedding(tiny_lm, tr)
    torch.testing.assert_close(rows[1:-1], masked.x[1:-1])  # [CLS] and [SEP] are masked too by the function


def test_a_model_without_a_mask_token_gets_one_line_naming_what_works(tiny_lm):
    class NoMask:
        mask_token_id = None

    lm = replace(tiny_lm, tokenizer=NoMask())
    tr = _trace(tiny_lm)
    with pytest.raises(NoMaskToken) as err:
        token_replacement(lm, tr, "mask")
    assert isinstance(err.value, UserError) and "\n" not in str(err.value) and "replacement='mean'" in str(err.value)
    with pytest.raises(ValueError, match="replacement must be one of"):
        token_replacement(tiny_lm, tr, "zeros")
