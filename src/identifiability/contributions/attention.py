"""Measures that read the attention weights alone: raw attention, attention rollout and attention flow
(Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", ACL), and effective attention (Brunner
et al. 2020, Section 3.4).

All four average the heads of a layer: ``Ā_l = mean_h A_h^l`` (d_s, d_s), rows summing to 1.

- ``raw``: Ā_l itself, per layer.
- ``rollout``: the residual connection counted as an attention to oneself, ``M_l = 0.5 Ā_l + 0.5 I`` (rows
  renormalised, as in the authors' code), composed across layers: ``c[l] = M_l M_{l-1} ... M_1``.
- ``flow``: the layered graph with one node per token and layer (layer 0: the input tokens) and an edge from
  token j of layer l - 1 to token i of layer l of capacity ``M_l[i, j]``; ``c[l, i, j]`` is the maximum flow
  from input node j to node i of layer l, rows normalised. Computed with
  :func:`scipy.sparse.csgraph.maximum_flow`, which takes integer capacities: ``M_l`` is scaled by
  :data:`FLOW_SCALE` and rounded, so a capacity below ``0.5 / FLOW_SCALE`` counts as no edge and each flow is
  exact to about ``d_s / FLOW_SCALE`` before normalising.
- ``effective``: the head mean of the effective attention ``A_eff = A - Proj_LN(T)(A)``
  (:mod:`identifiability.effective.projection`, the book's one implementation), per layer. A_eff may have negative
  entries and rows that do not sum to 1; a contribution share cannot be negative, so negative entries are
  set to zero and rows renormalised (the book's choice, stated here: the paper defines no share). Unlike raw
  attention, A_eff can give weight to a token that no head reads once d_s > d_v (the projection moves weight
  within col(T)); with d_s <= d_v it is A exactly.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from ..effective.projection import effective_attention
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, out_proj_weights
from .registry import normalise_rows, register, rollout

FLOW_SCALE = 10**6  # integer capacities for scipy's maximum flow: round(M * FLOW_SCALE)


def layers_with_identity(per_layer: torch.Tensor) -> torch.Tensor:
    """The registry's shape from L per-layer matrices: (L, d_s, d_s) -> (L+1, d_s, d_s) float64, entry 0 the
    identity (layer 0 is the input: each token is itself), entry l layer l's matrix."""
    n = per_layer.shape[-1]
    eye = torch.eye(n, dtype=torch.float64)[None]
    return torch.cat([eye, per_layer.to(torch.float64)])


def head_mean(tr: SentenceTrace) -> torch.Tensor:
    """Ā_l = mean over heads of the attention probabilities, shape (L, d_s, d_s), float64."""
    return tr.attentions.to(torch.float64).mean(1)


def residual_attention(tr: SentenceTrace) -> torch.Tensor:
    """Abnar & Zuidema's residual-augmented attention M_l = 0.5 Ā_l + 0.5 I, rows renormalised:
    (L+1, d_s, d_s), entry 0 the identity."""
    a = head_mean(tr)
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    return layers_with_identity(normalise_rows(0.5 * a + 0.5 * eye))


@register("raw", "Raw attention", "abnar2020quantifying", per_layer=True, kind="attention")
def raw(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Head-mean attention of each layer: (L+1, d_s, d_s), entry l = Ā_l."""
    return layers_with_identity(normalise_rows(head_mean(tr)))


@register("rollout", "Attention rollout", "abnar2020quantifying", per_layer=False, kind="attention")
def attention_rollout(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Attention rollout: (L+1, d_s, d_s), entry l = M_l ... M_1 with M the residual-augmented attention."""
    return rollout(residual_attention(tr))


def flow_graph(m: torch.Tensor, scale: int = FLOW_SCALE) -> csr_array:
    """The layered graph of attention flow as a sparse capacity matrix.

    Args:
        m: (L+1, d_s, d_s) per-layer matrices, entry 0 ignored; ``m[l, i, j]`` is the capacity of the edge
            from token j of layer l - 1 to token i of layer l.
        scale: capacities are ``round(m * scale)`` (scipy's maximum flow needs integers).
    Returns:
        ((L+1) d_s, (L+1) d_s) int32 capacities; node ``l * d_s + t`` is token t of layer l.
    """
    n_layers, n = m.shape[0] - 1, m.shape[-1]
    cap = np.zeros(((n_layers + 1) * n, (n_layers + 1) * n), dtype=np.int32)
    scaled = np.rint(m.detach().cpu().numpy() * scale).astype(np.int32)
    for k in range(n_layers):  # block k holds layer k + 1's edges, from the nodes of layer k
        cap[k * n : (k + 1) * n, (k + 1) * n : (k + 2) * n] = scaled[k + 1].T
    return csr_array(cap)


def max_flows(m: torch.Tensor, scale: int = FLOW_SCALE) -> torch.Tensor:
    """Attention flow from per-layer capacities.

    Args:
        m: (L+1, d_s, d_s) as for :func:`flow_graph`.
        scale: integer scale of the capacities.
    Returns:
        (L+1, d_s, d_s) float64: entry l, row i is the maximum flow from every input node j to node i of
        layer l, normalised to sum to 1; entry 0 the identity.
    """
    n_layers, n = m.shape[0] - 1, m.shape[-1]
    graph = flow_graph(m, scale)
    out = torch.zeros(n_layers + 1, n, n, dtype=torch.float64)
    out[0] = torch.eye(n, dtype=torch.float64)
    for target in range(1, n_layers + 1):
        # Only layers 0..target can carry flow into layer `target` (edges point up one layer).
        size = (target + 1) * n
        sub = csr_array(graph[:size, :size])
        for i in range(n):
            for j in range(n):
                out[target, i, j] = maximum_flow(sub, j, target * n + i).flow_value / scale
    return normalise_rows(out)


@register("flow", "Attention flow", "abnar2020quantifying", per_layer=False, kind="attention")
def attention_flow(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Attention flow on the residual-augmented attention: (L+1, d_s, d_s) (module docstring)."""
    return max_flows(residual_attention(tr))


@register("effective", "Effective attention", "brunner2020identifiability", per_layer=True, kind="attention")
def effective(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Head-mean effective attention of each layer, negative entries set to zero and rows renormalised:
    (L+1, d_s, d_s). Decomposed as the chapters do (float32, the book's rank rule)."""
    eff = effective_attention([tr], out_proj_weights(lm))[0].effective  # (L, H, d_s, d_s)
    share = eff.to(torch.float64).mean(1).clamp(min=0.0)
    return layers_with_identity(normalise_rows(share))
