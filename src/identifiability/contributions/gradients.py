"""Gradient measures, vector-valued like HTA: gradient × input and Integrated Gradients.

With J_ij = ∂h_i^l / ∂x_j (d x d), the Jacobian of hidden token i at layer l with respect to input token j
(x the output of the model's x module, as HTA reads it):

- gradient × input (Shrikumar, Greenside & Kundaje 2017, "Learning Important Features Through Propagating
  Activation Differences", who name Gradient*Input as the baseline they compare DeepLIFT against; it is
  first in their 2016 preprint): ``a_ij = ||J_ij x_j||``. Cited over Simonyan et al.'s saliency, which is the
  gradient alone, and Baehrens et al.'s local explanation vectors, also without the input factor.
- Integrated Gradients (Sundararajan, Taly & Yan 2017, "Axiomatic Attribution for Deep Networks"):
  ``a_ij = ||Jbar_ij (x_j - x'_j)||`` with Jbar_ij = ∫_0^1 J_ij(x' + α (x - x')) dα, the Jacobian averaged
  along the straight path from a baseline x' to x (all tokens move together, as in their definition).

Rows are normalised: ``c[l, i, j] = a_ij / Σ_j a_ij``. HTA is ``||J_ij||_F`` instead: these weigh the
Jacobian by the input actually present (a direction of J that x_j does not point along does not count).

Baseline: zeros by default, the all-zero input embedding that Sundararajan et al. use for their text models
(Section 6.3); here it is the zero vector in the space of x, after the embedding LayerNorm, where a token
carries no information. With it, gradient × input is the one-point rule at α = 1 of the same integral.
The zero baseline needs the model's biases: with every bias zero (the tiny random models' initialisation) each
layer's LayerNorm input scales with α, LayerNorm is scale-invariant, and h(α x) stays put for α > 0 except
within about sqrt(eps) of 0, where no quadrature with fixed nodes looks (measured on a tiny BERT: the 32-point
sum of the attributions is 1e-4 of f(x) - f(0); with random biases of scale 0.1, within 1e-7 of it).

Quadrature: Gauss-Legendre with ``steps`` nodes on [0, 1], Captum's rule (``method="gausslegendre"``), so its
numbers and ours agree to float precision on a scalar target. The default is not Captum's 32 nodes: on the
embedded model the path from the zero baseline is far from smooth (the integrand is large and uneven for α
below about 0.3, and neither panels nor nodes crowded towards 0 help), and 32 nodes leave rows whose
attributions miss a large share of h(x) - h(x') (chapter 10 shows it); the default is the number of nodes at
which the completeness gap (:func:`completeness_gaps`) is within :data:`COMPLETENESS_BOUND`
(tests/integration/test_contributions_real.py checks it on the real model).

Computed with forward-mode products (``torch.func.jvp`` under ``vmap``, through ``trace.from_x`` as
:mod:`identifiability.hta.generic` does): for each node α, the tangent that is ``x_j - x'_j`` at position j
and zero elsewhere gives ``J(α) (x_j - x'_j)`` for every layer and hidden token in one pass, so a sentence
costs ``steps · d_s`` JVPs (gradient × input: d_s). :func:`path_attributions` is the core: it takes a
``project`` of the hidden states, the identity for the measures, a scalar (one coordinate, or the dot with a
fixed vector, of one hidden token) for the signed attributions Captum computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..hta.core import auto_chunk, prepare
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, from_x
from .registry import normalise_rows, register

# Gauss-Legendre nodes on the path: chosen by the completeness gap alone (module docstring), before any score of
# the measure at this number was seen; Captum's default, 32, misses it (a version of the measure: cached arrays
# of 32 steps are computed again).
DEFAULT_STEPS = 256
# The completeness gap a row may leave, as a share of the row's total (:func:`completeness_gaps`): the shares
# are shown and compared to two decimals, and a row whose attributions miss more than 0.01 of its total
# cannot be trusted to them.
COMPLETENESS_BOUND = 0.01

Project = Callable[[torch.Tensor], torch.Tensor]  # (L+1, d_s, d) hidden states -> (*out) (linear)


def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes α_k in (0, 1) and weights w_k (summing to 1) of the ``steps``-point Gauss-Legendre rule on [0, 1]."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    x, w = np.polynomial.legendre.leggauss(steps)
    return 0.5 * (x + 1.0), 0.5 * w


def path_attributions(
    lm: LoadedModel,
    trace: SentenceTrace,
    project: Project | None = None,
    baseline: torch.Tensor | None = None,
    alphas: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    chunk: int | None = None,
) -> torch.Tensor:
    """Σ_k w_k · project(J(x' + α_k (x - x')) t_j) for every input token j, with t_j = x_j - x'_j at position
    j and zero elsewhere: the path-integrated Jacobian times the input difference, token by token.

    With the default ``alphas``/``weights`` (Gauss-Legendre, :data:`DEFAULT_STEPS`) this is Integrated
    Gradients; with ``alphas=[1]``, ``weights=[1]`` and a zero baseline it is gradient × input. ``project`` is
    applied inside the forward-mode product, so it must be linear (it is; a JVP of a linear map is the map).

    Args:
        lm: the model (any family of the registry).
        trace: one traced sentence.
        project: hidden states (L+1, d_s, d) -> any shape (*out); None: all of them.
        baseline: x' (d_s, d) or (d,); None: zeros (module docstring).
        alphas, weights: the quadrature nodes on [0, 1] and their weights.
        chunk: tangents per vmap batch (default: about 8,192 / d_s, as HTA).
    Returns:
        (d_s, *out) float64 on the CPU: entry j is input token j's attribution. For a scalar ``project`` this
        is (d_s,), the per-token sum of Captum's signed attributions.
    """
    from torch.func import jvp, vmap

    if alphas is None or weights is None:
        alphas, weights = gauss_legendre(DEFAULT_STEPS)
    inp = prepare(lm, trace)
    x = inp.x.detach()
    n, e = x.shape
    x0 = torch.zeros_like(x) if baseline is None else baseline.to(x.device, x.dtype).expand(n, e)
    diff = x - x0
    project = project or (lambda h: h)
    B = auto_chunk(n, chunk)
    # Node by node: the primal x' + α_k (x - x') is one point, shared by the d_s tangents (x_j - x'_j at position
    # j, zero elsewhere) pushed through it in chunks of B under one vmap, so each node's forward pass is made
    # once rather than once per token.
    tangents = torch.zeros(n, n, e, dtype=x.dtype, device=x.device)
    tangents[torch.arange(n, device=x.device), torch.arange(n, device=x.device)] = diff
    out: torch.Tensor | None = None
    with torch.no_grad(), from_x(lm) as slot:

        def projected(xx: torch.Tensor) -> torch.Tensor:
            slot["x"] = xx
            hidden = lm.model(**inp.enc, output_hidden_states=True).hidden_states
            return project(torch.stack([h[0] for h in hidden]))  # (L+1, n, d) -> (*out)

        for alpha, weight in zip(np.asarray(alphas, dtype=np.float64), np.asarray(weights, dtype=np.float64)):
            point = x0 + float(alpha) * diff  # (n, e)
            push = vmap(lambda t, point=point: jvp(projected, (point,), (t,))[1])
            part = torch.cat([push(tangents[s : s + B]) for s in range(0, n, B)]).double() * float(weight)
            out = part if out is None else out + part  # (n, *out): token j's share at this node
    assert out is not None
    return out.cpu()


def vector_contributions(attr: torch.Tensor) -> torch.Tensor:
    """(d_s_j, L+1, d_s_i, d) vector attributions -> (L+1, d_s_i, d_s_j) norms over d, rows summing to 1."""
    return normalise_rows(attr.norm(dim=-1).permute(1, 2, 0))


def integrated_gradients(
    lm: LoadedModel,
    trace: SentenceTrace,
    baseline: torch.Tensor | None = None,
    steps: int = DEFAULT_STEPS,
    chunk: int | None = None,
) -> torch.Tensor:
    """Integrated Gradients, vector-valued: c[l, i, j] ∝ ||Jbar_ij (x_j - x'_j)||, rows summing to 1.

    Args:
        baseline: x' (d_s, d) or (d,); None: zeros (module docstring).
        steps: Gauss-Legendre nodes on the path.
    Returns:
        (L+1, d_s, d_s) float64; entry 0 the identity (J = I at layer 0).
    """
    alphas, weights = gauss_legendre(steps)
    return vector_contributions(path_attributions(lm, trace, None, baseline, alphas, weights, chunk))


@dataclass(frozen=True)
class StepsGap:
    """Integrated Gradients at one number of steps, on one sentence (:func:`completeness_gaps`).

    Attributes:
        steps: Gauss-Legendre nodes on the path.
        gap: the completeness gap of the worst row (layer l >= 1, hidden token i), as a share of that row's
            total: ``||Σ_j a_ij - (h_i^l(x) - h_i^l(x'))|| / Σ_j ||a_ij||``.
        moved: the largest change of a share ``c[l, i, j]`` from the shares at the most steps asked for (0 there).
    """

    steps: int
    gap: float
    moved: float


def completeness_gaps(
    lm: LoadedModel,
    trace: SentenceTrace,
    steps: Sequence[int] = (8, 16, 32, 64),
    baseline: torch.Tensor | None = None,
    chunk: int | None = None,
) -> list[StepsGap]:
    """Integrated Gradients' completeness gap against its number of steps, on one sentence.

    Completeness (Sundararajan et al. 2017) holds for every hidden vector, coordinate by coordinate:
    ``Σ_j Jbar_ij (x_j - x'_j) = h_i^l(x) - h_i^l(x')`` exactly; what the quadrature misses shows as the gap.
    The gap is read as a share of the row's total ``Σ_j ||a_ij||``, the sum the measure divides by, because the
    gap is the sum of the per-token errors: a row whose gap is g has errors of at least g of its total.

    Args:
        steps: the numbers of Gauss-Legendre nodes to try; ``moved`` is measured against the largest.
        baseline: x' (d_s, d) or (d,); None: zeros, as the measure.
    Returns:
        One :class:`StepsGap` per entry of ``steps``, in its order.
    """
    inp = prepare(lm, trace)
    x = inp.x.detach()
    x0 = torch.zeros_like(x) if baseline is None else baseline.to(x.device, x.dtype).expand_as(x)
    with torch.no_grad(), from_x(lm) as slot:
        slot["x"] = x0
        at_baseline = torch.stack([h[0] for h in lm.model(**inp.enc, output_hidden_states=True).hidden_states])
    moved_by = (inp.hidden.double() - at_baseline.double()).cpu()[1:]  # (L, d_s, d): h(x) - h(x')
    found = []
    for n in steps:
        attr = path_attributions(lm, trace, None, baseline, *gauss_legendre(n), chunk)[:, 1:]  # (d_s_j, L, d_s_i, d)
        total = attr.norm(dim=-1).sum(0)  # (L, d_s_i): the row's total
        gap = (attr.sum(0) - moved_by).norm(dim=-1) / total
        found.append((n, float(gap.max()), vector_contributions(attr)))
    finest = found[int(np.argmax(steps))][2]
    return [StepsGap(n, gap, float((c - finest).abs().max())) for n, gap, c in found]


def grad_input(lm: LoadedModel, trace: SentenceTrace, chunk: int | None = None) -> torch.Tensor:
    """Gradient × input, vector-valued: c[l, i, j] ∝ ||J_ij x_j||, rows summing to 1; (L+1, d_s, d_s) float64."""
    one = np.ones(1)
    return vector_contributions(path_attributions(lm, trace, None, None, one, one, chunk))


register("grad_input", "Gradient × input", "shrikumar2017learning", per_layer=False, kind="gradient")(grad_input)
register(
    "integrated_gradients",
    "Integrated Gradients",
    "sundararajan2017axiomatic",
    per_layer=False,
    kind="gradient",
    version=2,  # DEFAULT_STEPS 32 -> 256
)(integrated_gradients)
