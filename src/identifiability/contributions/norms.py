"""Measures that read the norms of the decomposed layer output: each layer's output at token i is written as
a sum of one vector per input token j, and token j's share is read from the vector's size.

- ``norm`` (Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector
  Norms", EMNLP): ``||sum_h A_h[i, j] f_h(x_j)||`` with ``f_h(x) = (x W_V^h + b_V^h) W_O^h``, the head's
  transformed vector (:func:`identifiability.models.trace.transform`), per layer, rows normalised. Works on every
  family.
- ``norm_resln`` (Kobayashi et al. 2021, "Incorporating Residual and Normalization Layers into Analysis of
  Masked Language Models", EMNLP): the attention vectors plus the residual (x_i added to token i's own
  vector), passed through the linear part of the first LayerNorm, ``gamma * (v - mean(v)) / s_i`` per
  vector, where ``s_i = sqrt(var(z_i) + eps)`` is the standard deviation of the LayerNorm's actual input
  ``z_i`` (all vectors plus the output bias b_O); the norms, per layer, rows normalised. The bias terms
  (b_O and the LayerNorm's beta) belong to no token and are left out, as in the authors' code.
- ``globenc`` (Modarressi et al. 2022, "GlobEnc: Quantifying Global Token Attribution by Incorporating the
  Whole Encoder Layer in Transformers", NAACL): norm_resln's vectors passed on through the linear part of the
  second LayerNorm (after the FFN), with the standard deviation of that LayerNorm's actual input (FFN output
  plus its residual); the FFN itself is not decomposed (as the authors define it: its input's decomposition
  is carried by the residual). Per-layer norms, rows normalised, then rolled out across layers.
- ``alti`` (Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the Transformer",
  EMNLP): with ``T_i(x_j)`` norm_resln's vectors and ``y_i`` the actual output of the first LayerNorm (bias
  terms included), ``c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1)``, rows normalised, rolled out across
  layers (the FFN is not decomposed, as in the authors' code).

A LayerNorm's divisor s_i is the same for every vector of row i, so once rows are normalised it cancels from
norm_resln and globenc (their shares depend on gamma and the centring only); it matters for alti, whose
``y_i`` also carries the bias terms.

The last three read a post-LN layer's parts (attention, residual, LayerNorm, FFN, residual, LayerNorm) through
the architecture registry; on a pre-LN family they raise :class:`PostLNRequired`. Every quantity is recomputed
in float64 from the trace and the layer's weights, and the layer's output rebuilt from them must match the
trace's hidden state (:data:`REBUILD_TOL`), so a registry row that reads the wrong modules cannot pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..base.errors import UserError
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, out_proj_weights, transform
from .attention import layers_with_identity
from .registry import MEASURES, normalise_rows, register, rollout

POST_LN_MEASURES = ("norm_resln", "globenc", "alti")
REBUILD_TOL = 1e-4  # relative error allowed between the rebuilt layer output (float64) and the model's


class PostLNRequired(UserError, ValueError):
    """A measure that decomposes a post-LN layer asked of a pre-LN family; the message names those that work."""


def weighted_vectors(lm: LoadedModel, tr: SentenceTrace) -> list[torch.Tensor]:
    """The attention block's output decomposed by input token, before the output bias: per layer,
    ``sum_h A_h[i, j] f_h(x_j)``, shape (d_s, d_s, d) float64 (i: output token, j: input token)."""
    w_o = out_proj_weights(lm).to(torch.float64)
    out = []
    for a, v, w in zip(tr.attentions, tr.values, w_o):  # one layer each: (H, d_s, d_s), (H, d_s, d_v), (H, d_v, d)
        t = transform(v, w)  # (H, d_s, d) f_h(x_j)
        out.append(torch.einsum("hij,hjd->ijd", a.to(torch.float64), t))
    return out


@register("norm", "Attention norm", "kobayashi2020attention", per_layer=True, kind="norm")
def norm(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Kobayashi et al. (2020): (L+1, d_s, d_s), entry l the row-normalised ``||sum_h A_h[i,j] f_h(x_j)||``."""
    return layers_with_identity(normalise_rows(torch.stack([w.norm(dim=-1) for w in weighted_vectors(lm, tr)])))


# --------------------------------------------------------------------------------------------------
# The post-LN layer, decomposed
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostLNLayer:
    """One post-LN layer's parameters after the attention mixing, float64 (torch's y = x Wᵀ + b)."""

    b_o: torch.Tensor  # (d,) output-projection bias
    ln1: tuple[torch.Tensor, torch.Tensor, float]  # gamma (d,), beta (d,), eps
    w1: torch.Tensor  # (d_ff, d)
    b1: torch.Tensor  # (d_ff,)
    act: nn.Module  # element-wise activation
    w2: torch.Tensor  # (d, d_ff)
    b2: torch.Tensor  # (d,)
    ln2: tuple[torch.Tensor, torch.Tensor, float]


def _ln(mod: nn.Module) -> tuple[torch.Tensor, torch.Tensor, float]:
    return mod.weight.detach().to(torch.float64).cpu(), mod.bias.detach().to(torch.float64).cpu(), float(mod.eps)


def post_ln_layers(lm: LoadedModel, measure: str) -> list[PostLNLayer]:
    """The layers' parts through the registry row; :class:`PostLNRequired` (one line) on a pre-LN family."""
    a, m, L = lm.adapter, lm.model, lm.n_layers
    lns = a.layer_modules(m, a.ln_attn, L) + a.layer_modules(m, a.ln_ffn, L)
    if a.pre_ln or a.causal or not all(isinstance(ln, nn.LayerNorm) for ln in lns):
        works = ", ".join(sorted(set(MEASURES) - set(POST_LN_MEASURES)))
        raise PostLNRequired(
            f"measure {measure!r} decomposes a post-LN (BERT-like) layer and {a.family} is not one; "
            f"on {a.family} use one of: {works}"
        )
    f64 = lambda t: t.detach().to(torch.float64).cpu()
    mods = {f: a.layer_modules(m, getattr(a, f), L) for f in ("attn_out", "ln_attn", "ffn_in", "ffn_act", "ffn_out")}
    return [
        PostLNLayer(
            b_o=f64(mods["attn_out"][k].bias),
            ln1=_ln(mods["ln_attn"][k]),
            w1=f64(a.weight(mods["ffn_in"][k])),
            b1=f64(mods["ffn_in"][k].bias),
            act=mods["ffn_act"][k],
            w2=f64(a.weight(mods["ffn_out"][k])),
            b2=f64(mods["ffn_out"][k].bias),
            ln2=_ln(lns[L + k]),
        )
        for k in range(L)
    ]


def _ln_linear(v: torch.Tensor, gamma: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """The LayerNorm's linear part applied to each vector of a sum: ``gamma * (v - mean(v)) / std``.
    v: (d_s, ..., d); std: (d_s,) the standard deviation of each token's actual LayerNorm input."""
    shape = (-1,) + (1,) * (v.dim() - 1)
    return gamma * (v - v.mean(-1, keepdim=True)) / std.reshape(shape)


def _std(z: torch.Tensor, eps: float) -> torch.Tensor:
    """(d_s,) the LayerNorm's divisor for inputs z (d_s, d): sqrt(biased variance + eps)."""
    return torch.sqrt(z.var(-1, unbiased=False) + eps)


@dataclass(frozen=True)
class Decomposed:
    """One post-LN layer's output decomposed by input token.

    Attributes:
        ln1_terms: (d_s, d_s, d) T_i(x_j): attention + residual vectors through the first LayerNorm's linear part.
        ln1_out: (d_s, d) y_i, the first LayerNorm's actual output (bias terms included).
        ln2_terms: (d_s, d_s, d) ln1_terms through the second LayerNorm's linear part (GlobEnc); None unless
            asked for.
    """

    ln1_terms: torch.Tensor
    ln1_out: torch.Tensor
    ln2_terms: torch.Tensor | None


def decompose(lm: LoadedModel, tr: SentenceTrace, measure: str, second_ln: bool = False) -> list[Decomposed]:
    """Every layer of a post-LN model decomposed by input token (module docstring), checked against the trace;
    ``second_ln`` also passes the terms through the second LayerNorm (GlobEnc).

    Raises:
        PostLNRequired: on a pre-LN family.
        RuntimeError: if the layer output rebuilt from these parts differs from the trace's hidden state by
            more than :data:`REBUILD_TOL` (relative): the registry row reads the wrong modules.
    """
    layers = post_ln_layers(lm, measure)
    hidden = tr.hidden.to(torch.float64)
    out = []
    for k, (p, w) in enumerate(zip(layers, weighted_vectors(lm, tr))):  # k: index of the layer's input state
        e, e_next = hidden[k], hidden[k + 1]
        n = e.shape[0]
        terms = w.clone()
        terms[torch.arange(n), torch.arange(n)] += e  # the residual: x_i belongs to token i itself
        z1 = terms.sum(1) + p.b_o  # the first LayerNorm's actual input
        g1, beta1, eps1 = p.ln1
        s1 = _std(z1, eps1)
        t1 = _ln_linear(terms, g1, s1)
        y = t1.sum(1) + _ln_linear(p.b_o.expand(n, -1), g1, s1) + beta1  # = LN1(z1)
        with torch.no_grad():
            z2 = p.act(y @ p.w1.T + p.b1) @ p.w2.T + p.b2 + y  # FFN output plus its residual
        g2, beta2, eps2 = p.ln2
        s2 = _std(z2, eps2)
        rebuilt = g2 * (z2 - z2.mean(-1, keepdim=True)) / s2[:, None] + beta2
        err = float((rebuilt - e_next).norm() / e_next.norm())
        if err > REBUILD_TOL:
            raise RuntimeError(
                f"{measure}: layer {k + 1} of {lm.name} rebuilt from its decomposed parts differs from the model's "
                f"hidden state by {err:.1e} (relative) > {REBUILD_TOL:.0e}; the registry row of {lm.adapter.family} "
                "does not describe a post-LN layer"
            )
        out.append(Decomposed(t1, y, _ln_linear(t1, g2, s2) if second_ln else None))
    return out


@register("norm_resln", "Norm + residual + LN", "kobayashi2021incorporating", True, "norm")
def norm_resln(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Kobayashi et al. (2021): (L+1, d_s, d_s), entry l the row-normalised ``||T_i(x_j)||`` of layer l."""
    return layers_with_identity(
        normalise_rows(torch.stack([d.ln1_terms.norm(dim=-1) for d in decompose(lm, tr, "norm_resln")]))
    )


@register("globenc", "GlobEnc", "modarressi2022globenc", per_layer=False, kind="norm")
def globenc(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Modarressi et al. (2022): per-layer norms through both LayerNorms, rows normalised, rolled out:
    (L+1, d_s, d_s)."""
    per_layer = torch.stack([d.ln2_terms.norm(dim=-1) for d in decompose(lm, tr, "globenc", second_ln=True)])
    return rollout(layers_with_identity(normalise_rows(per_layer)))


@register("alti", "ALTI", "ferrando2022measuring", per_layer=False, kind="norm")
def alti(lm: LoadedModel, tr: SentenceTrace) -> torch.Tensor:
    """Ferrando et al. (2022): per-layer ``max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1)``, rows normalised, rolled
    out: (L+1, d_s, d_s)."""
    per_layer = []
    for d in decompose(lm, tr, "alti"):
        y = d.ln1_out[:, None, :]  # (d_s, 1, d) against the (d_s, d_s, d) terms
        per_layer.append((y.abs().sum(-1) - (y - d.ln1_terms).abs().sum(-1)).clamp(min=0.0))
    return rollout(layers_with_identity(normalise_rows(torch.stack(per_layer))))
