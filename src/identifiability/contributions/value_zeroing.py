"""Value Zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023, "Quantifying Context Mixing in Transformers").

For layer l and context token j, token j's value vectors are set to zero in every head of layer l (a
forward hook on the layer's value module: the whole value row v_j = e_j W_V + b_V, bias included, as their
code zeroes it), and layer l's block is run again on the *unaltered* hidden states of layer l - 1. The score
of token j in hidden token i is the cosine distance between token i's altered output of layer l and its
original output:

    C^l[i, j] = 1 - cos(h~_i^{l, ¬j}, h_i^l),     c^l = C^l / Σ_j C^l[i, j]   (rows summing to 1).

Keys and queries are left alone, so the attention weights do not change; everything after the attention
(W_O, the residual, the LayerNorms, the FFN) is part of the block that is rerun, which is what
distinguishes the measure from norm-based ones.

The own token. The brief of issue 34 asked for the own token to be excluded "as they do"; their code does not
exclude it: ``scoring/value_zeroing.py`` and ``demo.py`` of github.com/hmohebbi/ValueZeroing, and the BERT,
RoBERTa and GPT-2 models of their context_mixing_toolkit, fill ``score_matrix[l, :, t]`` for every t,
the diagonal included, then divide each row by its sum, and roll the result out without a residual term
(``compute_joint_attention(..., res=False)``). The diagonal is kept here too: it is what carries the token's
own share through rollout, and without it a layer whose attention is the identity would score all zeros
instead of the identity. ``value_zeroing_scores(..., exclude_self=True)`` gives the variant with the diagonal
set to zero before normalising.

The original output is the block's own output on the unaltered input (the same call, no hook), not the
model's ``hidden_states[l]``: for pre-LN families the last hidden state includes the final LayerNorm, which is
not part of layer L's block. Rows that did not move at all (a causal model's tokens before j, a token no head
reads) score exactly 0.

Cost: one forward pass to record each block's inputs (``register_forward_pre_hook(with_kwargs=True)``: the
masks and positions the model itself hands its blocks, so every family of the registry works unchanged),
then per layer one block call on a batch of d_s + 1 copies (copy 0 unaltered, copy k with token k - 1's
value row zeroed): L block calls on d_s + 1 rows.

A failure the method's users have reported: scores identical at every layer, when every layer was run from
the same hidden states or the hook stayed on the first layer; ``tests/unit/test_contributions_value_zeroing.py``
checks that layers that differ score differently.
"""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace
from .registry import normalise_rows, register


def layer_blocks(lm: LoadedModel) -> list[nn.Module]:
    """The module of each layer's whole block (attention, residuals, LayerNorms, FFN), one per layer (ALBERT's
    shared layer repeated): the enclosing module of the layer's value projection whose name ends at the layer
    index, e.g. ``encoder.layer.3`` for ``encoder.layer.3.attention.self.value``, ``h.3`` for GPT-2's
    ``h.3.attn.c_attn``."""
    a, m = lm.adapter, lm.model
    rx = re.compile(a.value)
    modules = dict(m.named_modules())
    blocks = []
    for name in (n for n, _ in m.named_modules() if rx.fullmatch(n)):
        parts = name.split(".")
        last_index = max(k for k, p in enumerate(parts) if p.isdigit())
        blocks.append(modules[".".join(parts[: last_index + 1])])
    if len(blocks) == 1 and lm.n_layers > 1:
        blocks = blocks * lm.n_layers
    if len(blocks) != lm.n_layers:
        raise LookupError(f"adapter {a.family!r}: found {len(blocks)} layer blocks for {lm.n_layers} layers")
    return blocks


def sentence_inputs(lm: LoadedModel, trace: SentenceTrace) -> dict:
    """The model's inputs for one traced sentence, batch 1 on the model's device: input_ids, attention_mask
    (all ones: a trace has no padding) and token_type_ids where the trace has segments; (1, d_s) each."""
    ids = trace.input_ids.reshape(1, -1)
    enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if trace.token_type_ids is not None:
        enc["token_type_ids"] = trace.token_type_ids.reshape(1, -1)
    return {k: v.to(lm.device) for k, v in enc.items()}


def block_output(out) -> torch.Tensor:
    """A block's hidden-state output, whether the family returns a tensor or a tuple."""
    return out[0] if isinstance(out, tuple) else out


def block_inputs(lm: LoadedModel, enc: dict) -> list[tuple[tuple, dict]]:
    """Run the model once on ``enc`` and record what it hands each layer's block: L (args, kwargs) pairs in
    layer order (a shared block reports once per call). The key/value cache is switched off where the model
    has one, so a block can be called again with the same arguments."""
    m = lm.model
    blocks = layer_blocks(lm)
    calls: list[tuple[tuple, dict]] = []
    hooks = [
        b.register_forward_pre_hook(lambda _m, args, kwargs: calls.append((args, kwargs)), with_kwargs=True)
        for b in dict.fromkeys(blocks)
    ]
    extra = {"use_cache": False} if "use_cache" in inspect.signature(m.forward).parameters else {}
    try:
        with torch.no_grad():
            m(**enc, **extra)
    finally:
        for h in hooks:
            h.remove()
    if len(calls) != lm.n_layers:
        raise RuntimeError(f"recorded {len(calls)} block calls for {lm.n_layers} layers")
    return calls


def block_hidden(args: tuple, kwargs: dict) -> torch.Tensor:
    """The hidden-state input a block was handed (the first positional argument, or ``hidden_states``):
    (batch, d_s, d)."""
    return args[0] if args else kwargs["hidden_states"]


def with_hidden(args: tuple, kwargs: dict, h: torch.Tensor) -> tuple[tuple, dict]:
    """The block's recorded arguments with its hidden-state input replaced by ``h`` (B, d_s, d); masks and
    positions of batch size 1 broadcast as they are."""
    if args:
        return (h, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": h}


def _batched(args: tuple, kwargs: dict, copies: int) -> tuple[tuple, dict]:
    """The block's hidden-state input repeated ``copies`` times along the batch."""
    h = block_hidden(args, kwargs)
    return with_hidden(args, kwargs, h.expand(copies, *h.shape[1:]).contiguous())


@torch.no_grad()
def value_zeroing_scores(
    lm: LoadedModel, trace: SentenceTrace, exclude_self: bool = False, calls: list | None = None
) -> torch.Tensor:
    """Raw Value Zeroing distances of every layer, before normalisation.

    Args:
        lm: the model (any family of the registry).
        trace: one traced sentence (its token ids and segments are used).
        exclude_self: set the diagonal (token i's own value zeroed) to 0; their code keeps it (module docstring).
        calls: :func:`block_inputs` of this sentence, if already recorded.
    Returns:
        (L, d_s, d_s) float64: entry l - 1 (enumerating layers 1..L) holds C^l[i, j], the cosine distance
        between token i's output of layer l with token j's value row zeroed and its original output.
    """
    a = lm.adapter
    enc = sentence_inputs(lm, trace)
    n = enc["input_ids"].shape[1]
    calls = calls if calls is not None else block_inputs(lm, enc)
    values = a.layer_modules(lm.model, a.value, lm.n_layers)
    blocks = layer_blocks(lm)
    rows = torch.arange(1, n + 1, device=lm.device)  # copy k zeroes token k - 1
    cols = torch.arange(n, device=lm.device)

    def zero_value(_m, _i, out: torch.Tensor) -> torch.Tensor:
        out = out.clone()
        width = out.shape[-1] // 3 if a.qkv_fused else out.shape[-1]  # a fused projection: v is the last third
        out[rows, cols, out.shape[-1] - width :] = 0.0
        return out

    scores = torch.zeros(lm.n_layers, n, n, dtype=torch.float64)
    for k, (block, value, (args, kwargs)) in enumerate(zip(blocks, values, calls)):
        hook = value.register_forward_hook(zero_value)
        try:
            b_args, b_kwargs = _batched(args, kwargs, n + 1)
            out = block_output(block(*b_args, **b_kwargs)).double()  # (n + 1, n, d)
        finally:
            hook.remove()
        orig, alt = out[0], out[1:]  # (n, d), (n_j, n_i, d)
        dist = 1.0 - torch.nn.functional.cosine_similarity(alt, orig.unsqueeze(0), dim=-1)  # (n_j, n_i)
        dist = torch.where((alt == orig.unsqueeze(0)).all(-1), 0.0, dist.clamp_min(0.0))  # unmoved rows: 0
        scores[k] = dist.T.cpu()
    if exclude_self:
        scores.diagonal(dim1=-2, dim2=-1).zero_()
    return scores


@register("value_zeroing", "Value Zeroing", "mohebbi2023quantifying", per_layer=True, kind="intervention")
def value_zeroing(lm: LoadedModel, trace: SentenceTrace) -> torch.Tensor:
    """Value Zeroing per layer (module docstring), rows normalised as their code does.

    Returns:
        (L+1, d_s, d_s) float64: entry 0 the identity, entry l layer l's own mixing (tokens of layer l - 1
        into layer l); ``compute(..., rolled=True)`` rolls it out as their code does (no residual term).
    """
    s = value_zeroing_scores(lm, trace)
    eye = torch.eye(s.shape[-1], dtype=s.dtype).unsqueeze(0)
    return torch.cat([eye, normalise_rows(s)])
