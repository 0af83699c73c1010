"""Generic forward mode: ``torch.func.jvp`` under ``vmap`` over chunks of tangents, any architecture.

Forward mode (a Jacobian-vector product, JVP) carries one input direction through *all* layers in one
sweep, so one pass over the d_s·d directions yields every layer's blocks. The model is run "from x" by a
forward hook on its x module (``trace.from_x``), so this works for every architecture in the registry:
causal masks and pre-LN are just part of the model it differentiates.

Memory (float32, B = tangent directions per chunk, n = d_s, H heads, d width, d_ff FFN width, L layers):
at most about 4·B·n·((L+1)·d + 3·d_ff + 4·H·n) bytes per chunk (the stacked tangent outputs plus one
layer's widest intermediates), on top of one ordinary forward pass; :func:`.folded.peak_bytes` evaluates
it with ``method="generic"``.
"""

from __future__ import annotations

import torch

from ..models.loaded_model import LoadedModel
from ..models.trace import from_x
from .core import Directions, Inputs, auto_chunk


def generic_S(lm: LoadedModel, inp: Inputs, dirs: Directions, chunk: int | None) -> torch.Tensor:
    """(L+1, n, n) float64 squared block norms on the CPU, by ``jvp`` under ``vmap`` over chunks of ``dirs``."""
    # no_grad: forward AD does not need it, and the parameters would otherwise record a reverse graph.
    with torch.no_grad(), from_x(lm) as slot:

        def hidden_of(xx):
            slot["x"] = xx
            out = lm.model(**inp.enc, output_hidden_states=True)
            return torch.stack([h[0] for h in out.hidden_states])  # (L+1, n, d)

        return jvp_S(hidden_of, inp.x.detach(), dirs, chunk).cpu()


def jvp_S(fn, x: torch.Tensor, dirs: Directions, chunk: int | None) -> torch.Tensor:
    """Squared block norms of the Jacobian of any ``fn`` of one sentence's tokens, by ``jvp`` under ``vmap``.

    The one place the forward-mode sweep is written: :func:`generic_S` differentiates the whole model from
    x, :func:`identifiability.contributions.one_layer.hta_layer` one layer's block from its input.

    Args:
        fn: (n, e) -> (K, n, d), differentiable in forward mode (call it under ``torch.no_grad``).
        x: (n, e) the point the Jacobian is taken at.
        dirs: the tangent directions of x (:class:`Directions` with ``n`` and ``e`` of x).
        chunk: directions per batch (None: about DEFAULT_ROWS / n).
    Returns:
        (K, n, n) float64 on x's device: entry [k, i, j] = ||∂fn(x)[k, i] / ∂x_j||_F² (its unbiased
        estimate for random probes).
    """
    from torch.func import jvp, vmap

    n, e = x.shape
    B = auto_chunk(n, chunk)

    def sq_norms(t):  # one tangent (n, e) -> ||J_{:, :, pos} t||² for every output k and position
        return jvp(fn, (x,), (t,))[1].pow(2).sum(-1)  # (K, n)

    batched = vmap(sq_norms)
    S = None
    for start in range(0, dirs.count, B):
        stop = min(start + B, dirs.count)
        pos, vec = dirs.chunk(start, stop, x.device, x.dtype)
        t = torch.zeros(stop - start, n, e, dtype=x.dtype, device=x.device)
        t[torch.arange(stop - start, device=x.device), pos] = vec
        sq = batched(t)  # (B, K, n)
        if S is None:
            S = torch.zeros(sq.shape[1], n, n, dtype=torch.float64, device=x.device)
        S.index_add_(2, pos, sq.permute(1, 2, 0).double(), alpha=dirs.weight)
    return S
