"""The naive reverse-mode reference: one ``autograd.grad`` per (layer, hidden position, output coordinate).

The obvious research script, kept as the reference the tests compare the fast engines against on tiny
inputs. An exact answer must push d_s·d output directions per layer back through the network; reverse
mode needs a pass per layer, position and output coordinate (cost ∝ L(L+1)/2), which is why the engines
of :mod:`.generic` and :mod:`.folded` run forward mode instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, from_x
from .core import Inputs, prepare
from .result import HTAResult


def hta_naive(
    lm: LoadedModel,
    text_or_trace: str | SentenceTrace,
    max_tokens: int | None = None,
    rows: Sequence[tuple[int, int]] | None = None,
) -> HTAResult:
    """Exact S (squared block norms) by reverse mode, one ``autograd.grad`` per (layer, hidden position,
    output coordinate).

    (L+1)·d_s·d backward passes (the last layers' ones through the whole network): minutes to an hour
    per sentence on a real model. This is the reference that the fast engines are tested against.

    Args:
        rows: only these (layer, hidden position) rows of S (the others are NaN), to check a real model
            in seconds instead of an hour.
    """
    t0 = time.perf_counter()
    inp = prepare(lm, text_or_trace, max_tokens)
    hs, x = _graph_from_x(lm, inp)
    n_layers, n, d = len(hs), inp.x.shape[0], hs[0].shape[-1]
    if rows is None:
        rows = [(layer, i) for layer in range(n_layers) for i in range(n)]
        S = torch.zeros(n_layers, n, n, dtype=torch.float64)
    else:
        S = torch.full((n_layers, n, n), float("nan"), dtype=torch.float64)
    for layer, i in rows:
        S[layer, i] = 0.0
        for k in range(d):
            (g,) = torch.autograd.grad(hs[layer][0, i, k], x, retain_graph=True)
            S[layer, i] += g.pow(2).sum(-1).double().cpu()
    return HTAResult(inp.text, inp.tokens, S, "naive", seconds=time.perf_counter() - t0, special=inp.special)


def _graph_from_x(lm: LoadedModel, inp: Inputs) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The hidden states (L+1 tensors of shape (1, n, d)) as an autograd graph from a fresh leaf x (n, d)."""
    x = inp.x.detach().clone().requires_grad_(True)
    with from_x(lm) as slot, torch.enable_grad():
        slot["x"] = x
        hs = lm.model(**inp.enc, output_hidden_states=True).hidden_states
    return hs, x


def hidden_graph(lm: LoadedModel, text_or_trace: str | SentenceTrace) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """For experiments of one's own in reverse mode: the hidden states of one sentence (L+1 tensors of shape
    (1, d_s, d)) as an autograd graph from a leaf x of shape (d_s, d), the input embeddings that HTA
    differentiates with respect to. ``torch.autograd.grad(f(hs), x)`` gives the gradient of any f."""
    return _graph_from_x(lm, prepare(lm, text_or_trace))


def naive_seconds(lm: LoadedModel, text_or_trace: str | SentenceTrace, per_layer: int = 24, seed: int = 0) -> float:
    """Extrapolated wall time of :func:`hta_naive` from ``per_layer`` timed backward passes per layer.

    A full naive run on a real model takes tens of minutes; the passes of one layer all cost about the
    same (the same graph from that layer down), so the median time of a sample of them per layer times
    the number of passes estimates it (the median, because a shared machine adds rare long stalls).
    """
    inp = prepare(lm, text_or_trace)
    hs, x = _graph_from_x(lm, inp)
    n, d = inp.x.shape[0], hs[0].shape[-1]
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for layer in range(len(hs)):
        picks = torch.randint(0, n * d, (per_layer,), generator=g).tolist()
        times = []
        for p in picks:
            t0 = time.perf_counter()
            (gr,) = torch.autograd.grad(hs[layer][0, p // d, p % d], x, retain_graph=True)
            gr.pow(2).sum(-1).double().cpu()
            times.append(time.perf_counter() - t0)
        total += sorted(times)[len(times) // 2] * n * d
    return total
