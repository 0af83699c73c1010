"""A trained post-LN encoder re-split into another number of heads: every weight kept, only which dimensions of
Q, K and V share a softmax changes.

A layer's Q, K and V maps (d -> H * d_v) and its output map W_O (H * d_v -> d) do not depend on how their
H * d_v dimensions are grouped into heads; only the attention does: head h's softmax reads dimensions
[h * d_v, (h + 1) * d_v). Changing the config's ``num_attention_heads`` from H to H' = H * d_v / d_v' therefore
gives a model of the same weights with heads of width d_v' (24 heads of 16, 6 of 64, 3 of 128 for the default
model's 12 of 32). At d_v' = d_v it is the same model.

**The attention scale.** The model classes compute it from the head width, 1/sqrt(d_v'), and the re-split
keeps that: Q is not rescaled. Three reasons, the first two from what healing needs. (1) Every weight stays
bit for bit what it was (:func:`resplit`), so the healed member's distance from the original is all training,
and the chapters, which rebuild the attention from the weights with the model's own scale, read the member
as the ordinary model it is. (2) 1/sqrt(d_k) is the scale that keeps a head's logits' spread independent of
its width when the dimensions contribute about independently (the reason for it): a new head of d_v' dimensions
then starts with logits spread about as widely as the original heads', neither sharper (merged heads at a
rescaled Q would add H/H' heads' logits) nor flatter. (3) Healing can learn any other scale through W_Q;
it cannot learn the bit-identity back. And it starts healing closer: on the pre-training text's held-out
documents (24 blocks of 128 tokens, 500 sentence pairs), the default model re-split at d_v' = 16 keeps a
last-layer cosine of 0.845 with the original (0.790 with Q rescaled to the original's logit scale), at
d_v' = 128 0.702 (0.625), and the sentence pairs' Spearman 0.885 (0.792) and 0.738 (0.673)
(``benchmarks/bench_resplit.py`` measures both). ``tests/unit/test_resplit.py`` checks the scale against
logits built by hand from the unchanged weights.

Refused in one line before any weight is read (:func:`check_resplit`): a width that does not divide the
hidden size, a pre-LN or decoder model, a model whose Q, K and V are one fused map, a config without
``num_attention_heads``; after loading (:func:`check_layers`), a model whose layers share one set of weights.
"""

from __future__ import annotations

import copy
import warnings
from typing import TYPE_CHECKING

from ..base.errors import UserError
from .adapters import Adapter

if TYPE_CHECKING:
    from torch import nn


class ResplitError(UserError, ValueError):
    """A model or width that cannot be re-split; one line that says what to pass instead."""


def check_resplit(config, adapter: Adapter, width: int, name: str = "the model") -> int:
    """The number of heads of width ``width`` for ``config``'s model (read from the config alone).

    Raises:
        ResplitError: one line, when the architecture is not a post-LN encoder with separate Q, K and V maps
            and a ``num_attention_heads``, or ``width`` does not divide its hidden size.
    """
    if adapter.pre_ln or adapter.causal:
        raise ResplitError(
            f"{name} is a {adapter.family} model (pre-LN or decoder): re-splitting and its healing are defined for "
            "post-LN encoders such as the default all-MiniLM-L6-v2; pass one of those with --model"
        )
    if adapter.qkv_fused:
        raise ResplitError(
            f"{name} computes Q, K and V with one fused map ({adapter.family}): re-splitting needs separate Q, K "
            "and V maps; pass a post-LN encoder such as the default all-MiniLM-L6-v2 with --model"
        )
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    if not isinstance(heads, int) or not isinstance(hidden, int):
        raise ResplitError(
            f"{name}'s config has no num_attention_heads and hidden_size: its head count cannot be changed; pass "
            "a post-LN encoder such as the default all-MiniLM-L6-v2 with --model"
        )
    if isinstance(width, bool) or not isinstance(width, int) or width < 1 or hidden % width:
        widths = ", ".join(str(w) for w in range(1, hidden + 1) if hidden % w == 0 and 8 <= w <= 256)
        raise ResplitError(
            f"a head width of {width} does not divide {name}'s hidden size {hidden}: pick a divisor, e.g. {widths}"
        )
    return hidden // width


def check_layers(model: nn.Module, adapter: Adapter, name: str = "the model") -> None:
    """ResplitError when ``model``'s layers do not each have their own Q map (layers that share one set of
    weights cannot be healed layer by layer, and a shared layer heals for all depths at once)."""
    n_layers = int(model.config.num_hidden_layers)
    found = len(adapter.find(model, adapter.query, required=False))
    if found != n_layers:
        raise ResplitError(
            f"{name} has {found} query maps for {n_layers} layers (its layers share weights): re-splitting is "
            "defined for encoders with one set of weights per layer; pass such a model with --model"
        )


def resplit_config(config, width: int):
    """A copy of ``config`` with heads of width ``width`` (``num_attention_heads`` = hidden size / width),
    eager attention (the chapters read the attention probabilities)."""
    new = copy.deepcopy(config)
    new.num_attention_heads = int(config.hidden_size) // int(width)
    new._attn_implementation = "eager"
    return new


def resplit(model: nn.Module, adapter: Adapter, width: int, name: str = "the model") -> nn.Module:
    """``model`` (a base model, what ``AutoModel`` returns) with heads of width ``width``: a new model of the
    same class whose every tensor is a copy of ``model``'s, bit for bit; ``model`` is left as it was.

    Raises:
        ResplitError: see :func:`check_resplit` and :func:`check_layers`.
    """
    check_resplit(model.config, adapter, width, name)
    check_layers(model, adapter, name)
    config = resplit_config(model.config, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = type(model)(config)
    # strict: every tensor of the original has its place, and no new one is left at its random initialisation
    new.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()}, strict=True)
    return new.train(model.training).to(next(model.parameters()).device)


def heads_and_width(model: nn.Module) -> tuple[int, int]:
    """(H, d_v) of ``model``: its config's head count and the width each head gets."""
    heads = int(model.config.num_attention_heads)
    return heads, int(model.config.hidden_size) // heads
