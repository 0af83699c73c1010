"""A model re-split into heads of another width (issue 55): every weight kept bit for bit, the same model at
its own width, another function at any other, the attention scale 1/sqrt(d_v') of the new width, and each
model that cannot be re-split refused in one line before any work."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from identifiability.models.load import random_model
from identifiability.models.resplit import ResplitError, check_resplit, heads_and_width, resplit

IDS = torch.tensor([[101, 2023, 2003, 1037, 3231, 6251, 2007, 2070, 2616, 102]])


def _states(model) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return model.eval()(input_ids=IDS, output_hidden_states=True).hidden_states


@pytest.fixture(scope="module")
def tiny():
    """A tiny BERT: hidden 64, 4 heads of d_v = 16, 2 layers."""
    return random_model("bert", seed=3)


def test_its_own_width_is_the_same_model_bit_for_bit(tiny):
    same = resplit(tiny.model, tiny.adapter, 16)
    assert heads_and_width(same) == (4, 16)
    for a, b in zip(_states(tiny.model), _states(same)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("width", [8, 32, 64])
def test_another_width_keeps_every_weight_and_changes_the_function(tiny, width):
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    member = resplit(tiny.model, tiny.adapter, width)
    assert heads_and_width(member) == (64 // width, width)
    after = member.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert all(torch.equal(v, before[k]) for k, v in tiny.model.state_dict().items())  # the original untouched
    assert tiny.model.config.num_attention_heads == 4
    mine, theirs = _states(member), _states(tiny.model)
    assert torch.equal(mine[0], theirs[0])  # the embeddings have no attention
    assert not torch.allclose(mine[-1], theirs[-1], atol=1e-4)


@pytest.mark.parametrize("width", [8, 32])
def test_the_attention_scale_is_one_over_the_root_of_the_new_width(tiny, width):
    """The first layer's attention of the re-split model equals softmax(Q_h K_h^T / sqrt(d_v')) built by hand from
    the unchanged weights: Q is not rescaled, the scale follows the new width."""
    member = resplit(tiny.model, tiny.adapter, width)
    with torch.no_grad():
        out = member(input_ids=IDS, output_attentions=True, output_hidden_states=True)
        x, layer = out.hidden_states[0][0], tiny.model.encoder.layer[0].attention.self  # the original's maps
        q, k = layer.query(x), layer.key(x)
        heads = 64 // width
        q, k = (t.view(len(x), heads, width).transpose(0, 1) for t in (q, k))
        by_hand = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(width), dim=-1)
        wrong = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(16), dim=-1)  # the original width's scale
    assert torch.allclose(out.attentions[0][0], by_hand, atol=1e-6)
    assert not torch.allclose(out.attentions[0][0], wrong, atol=1e-4)


@pytest.mark.parametrize("width", [0, 5, 24, 128, True, "16"])
def test_a_width_that_does_not_divide_the_hidden_size_is_one_line(tiny, width):
    with pytest.raises(ResplitError) as e:
        check_resplit(tiny.model.config, tiny.adapter, width)
    assert "\n" not in str(e.value)
    assert "does not divide" in str(e.value) and "64" in str(e.value)


def test_a_pre_ln_decoder_with_a_fused_qkv_is_refused_in_one_line():
    lm = random_model("gpt2", seed=0)
    with pytest.raises(ResplitError, match="pre-LN or decoder") as e:
        resplit(lm.model, lm.adapter, 8)
    assert "\n" not in str(e.value)


def test_a_fused_qkv_is_refused_in_one_line(tiny):
    fused = dataclasses.replace(tiny.adapter, qkv_fused=True)
    with pytest.raises(ResplitError, match="separate Q, K and V") as e:
        check_resplit(tiny.model.config, fused, 16)
    assert "\n" not in str(e.value)


def test_a_config_without_heads_is_refused_in_one_line(tiny):
    class Config:
        hidden_size = 64

    with pytest.raises(ResplitError, match="no num_attention_heads"):
        check_resplit(Config(), tiny.adapter, 16)


def test_layers_that_share_weights_are_refused_in_one_line():
    lm = random_model("albert", seed=0)
    with pytest.raises(ResplitError, match="share weights") as e:
        resplit(lm.model, lm.adapter, 8)
    assert "\n" not in str(e.value)
