"""What effective attention is compared with (chapter 3), and what its T is built from.

Two null models, each giving the same head a subspace of the same rank that has nothing to do with the
model's value map:

- :func:`random_projection`: A projected onto a uniformly random subspace of the rank of col(T). Whatever
  A_eff shares with it comes from dimension counting alone.
- :func:`random_values`: the same inputs E with random value weights (and a random W_O), a stronger null:
  the subspace is the column space of E W, so whatever structure the inputs carry (a start token whose
  embedding stands apart, say) is kept, and only the trained value map is replaced.

And T's value bias: the trace's V_h = E W_V + b_V includes it (:func:`value_bias` reads b_V, and
:func:`value_inputs` the E every head's value map reads).
"""

from __future__ import annotations

import torch

from ..base.linalg import one_thread
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace


def random_basis(a: torch.Tensor, rank: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """An orthonormal basis of a uniformly random subspace of the same rank as col(T), per head.

    A uniformly random r-dimensional subspace of R^n is the span of r Gaussian vectors, so a basis comes from
    the QR of an n x r Gaussian matrix (not n x n): the first k of its columns span a uniformly random
    k-dimensional subspace, so one draw of r = max(rank) columns serves every head.

    Args:
        a: (..., n, n) attention (for its shape); rank: (...) the rank of each head's T.
    Returns:
        (..., n, r) float64, the columns past each head's rank zero.
    """
    n = a.shape[-1]
    r = max(1, min(n, int(rank.max())))
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*a.shape[:-2], n, r, generator=g, dtype=torch.float64)
    with one_thread():
        q, _ = torch.linalg.qr(z)
    return q * (torch.arange(r) < rank[..., None]).unsqueeze(-2).to(q.dtype)


def random_projection(a: torch.Tensor, rank: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """The first null model itself: (..., n, n) A projected onto :func:`random_basis`, ``A Q Qᵀ``, in ``a``'s
    dtype (the chapter's measures use ``A Q`` alone, see ``effective.pearson_projected``)."""
    q = random_basis(a, rank, seed)
    return ((a.double() @ q) @ q.mT).to(a.dtype)


def value_bias(lm: LoadedModel) -> torch.Tensor:
    """b_V of every head, shape (L, H, d_v): each layer's value map applied to a zero input (works for a
    fused q/k/v projection too, whose output the adapter splits)."""
    a = lm.adapter
    out = []
    with torch.no_grad():
        for m in a.layer_modules(lm.model, a.value, lm.n_layers):
            zero = torch.zeros(1, 1, a.weight(m).shape[1], dtype=a.weight(m).dtype, device=a.weight(m).device)
            out.append(a.split_values(m(zero), lm.n_heads)[0, :, 0])  # (H, d_v)
    return torch.stack(out).cpu()


def without_value_bias(values: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """V_h - b_V = E W_V: (..., L, H, d_s, d_v) values minus (L, H, d_v) biases."""
    return values - bias.to(values.dtype).unsqueeze(-2)


def value_inputs(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """E of every layer, shape (L, d_s, d): what the layer's value map reads. Post-LN: the hidden state the
    layer receives; pre-LN: that hidden state after the layer's first LayerNorm."""
    e = tr.hidden[:-1]
    if not lm.adapter.pre_ln:
        return e
    lns = lm.adapter.layer_modules(lm.model, lm.adapter.ln_attn, lm.n_layers)
    p = next(lns[0].parameters())
    with torch.no_grad():
        return torch.stack([ln(e[layer].to(p.device, p.dtype)).cpu() for layer, ln in enumerate(lns)])


def random_value_weights(lm: LoadedModel, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random W_V (L, H, d, d_v) and W_O (L, H, d_v, d) of the model's shapes, Gaussian, seeded: one random
    value map for every input, as a model's weights are. A Gaussian W_O has full rank d_v (almost surely), so
    col(T) = col(E W_V W_O) = col(E W_V): :func:`value_basis` needs W_V only."""
    g = torch.Generator().manual_seed(seed)
    d, L, H, d_v = lm.d_model, lm.n_layers, lm.n_heads, lm.d_v
    w_v = torch.randn(L, H, d, d_v, generator=g) / d**0.5
    w_o = torch.randn(L, H, d_v, d, generator=g) / d_v**0.5
    return w_v, w_o


def random_values(inputs: torch.Tensor, w_v: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The values a random value map gives the same inputs: (L, d_s, d) E and (L, H, d, d_v) W_V ->
    (L, H, d_s, d_v) E W_V (+ b_V, the model's own, where T includes it)."""
    v = torch.einsum("lnd,lhdk->lhnk", inputs.to(w_v.dtype), w_v)
    return v if bias is None else v + bias.to(v.dtype).unsqueeze(-2)


def value_basis(inputs: torch.Tensor, w_v: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The second null model: an orthonormal basis of col(T) for random value weights on the same inputs,
    (L, H, d_s, min(d_s, d_v)) float64, from the QR of :func:`random_values` (of full rank for random W_V)."""
    with one_thread():
        q, _ = torch.linalg.qr(random_values(inputs, w_v, bias).double())
    return q
