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
    from torch.func import jvp, vmap

    n, e = inp.x.shape
    B = auto_chunk(n, chunk)
    S = torch.zeros(inp.hidden.shape[0], n, n, dtype=torch.float64, device=inp.x.device)
    x = inp.x.detach()
    # no_grad: forward AD does not need it, and the parameters would otherwise record a reverse graph.
    with torch.no_grad(), from_x(lm) as slot:

        def hidden_of(xx):
            slot["x"] = xx
            out = lm.model(**inp.enc, output_hidden_states=True)
            return torch.stack([h[0] for h in out.hidden_states])  # (L+1, n, d)

        def sq_norms(t):  # one tangent (n, e) -> ||J_{:, :, pos} t||² for every layer and position
            return jvp(hidden_of, (x,), (t,))[1].pow(2).sum(-1)  # (L+1, n)

        batched = vmap(sq_norms)
        for start in range(0, dirs.count, B):
            stop = min(start + B, dirs.count)
            pos, vec = dirs.chunk(start, stop, x.device, x.dtype)
            t = torch.zeros(stop - start, n, e, dtype=x.dtype, device=x.device)
            t[torch.arange(stop - start, device=x.device), pos] = vec
            sq = batched(t)  # (B, L+1, n)
            S.index_add_(2, pos, sq.permute(1, 2, 0).double(), alpha=dirs.weight)
    return S.cpu()
