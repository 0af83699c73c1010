"""What the tests of the context-mixing measures compute by hand: a post-LN layer written out in plain formulas
(float64, from the layer's weights), and attention forced to a pattern (identity, or one token no head reads).

Not a test module: imported by tests/unit/test_contributions_*.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def layer_by_hand(lm, layer: int, e: torch.Tensor, zero_value: int | None = None) -> torch.Tensor:
    """Layer ``layer`` (0-based module index) of a post-LN model on the hidden states ``e`` (n, d), written out:
    per head softmax(q k^T / sqrt(d_v)) v, concatenated, W_O, residual, LayerNorm, FFN (exact-erf GELU),
    residual, LayerNorm. ``zero_value``: token whose value row (bias included) is set to zero in every head.
    Returns (n, d) float64."""
    a, m = lm.adapter, lm.model

    def mod(pattern):
        return a.layer_modules(m, pattern, lm.n_layers)[layer]

    def lin(pattern, x):
        md = mod(pattern)
        return x @ md.weight.double().T + md.bias.double()

    def ln(pattern, x):
        md = mod(pattern)
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + md.eps) * md.weight.double() + md.bias.double()

    e = e.double()
    n, d = e.shape
    H, dv = lm.n_heads, lm.d_v
    q, k, v = lin(a.query, e), lin(a.key, e), lin(a.value, e)
    if zero_value is not None:
        v[zero_value] = 0.0
    heads = []
    for h in range(H):
        cols = slice(h * dv, (h + 1) * dv)
        scores = q[:, cols] @ k[:, cols].T / math.sqrt(dv)
        heads.append(torch.softmax(scores, dim=-1) @ v[:, cols])
    h1 = ln(a.ln_attn, e + lin(a.attn_out, torch.cat(heads, dim=-1)))
    inner = lin(a.ffn_in, h1)
    gelu = 0.5 * inner * (1.0 + torch.erf(inner / math.sqrt(2.0)))
    return ln(a.ln_ffn, h1 + lin(a.ffn_out, gelu))


@contextmanager
def forced_attention(kind: str, column: int | None = None) -> Iterator[None]:
    """While active, every attention probability matrix the models compute (the eager attention's
    ``nn.functional.softmax`` over the last axis of a (B, H, n, n) score tensor) is replaced:

    - ``"identity"``: A = I, each token attends to itself only;
    - ``"unread"``: column ``column`` masked out (weight exactly 0, the rows renormalised by the softmax), so
      no head of any layer reads that token.

    Other softmaxes pass through. Works under ``torch.func`` transforms (the result is a function of p)."""
    real = torch.nn.functional.softmax

    def forced(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002 (softmax's own signature)
        if input.dim() != 4 or dim not in (-1, 3) or input.shape[-1] != input.shape[-2]:
            return real(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
        if kind == "identity":
            p = real(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
            return p * 0.0 + torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)
        # the column's scores set to -inf before the softmax, as an attention mask does: the others' weights
        # then do not depend on token ``column`` at all, not even through rounding
        unread = torch.zeros(input.shape[-1], dtype=torch.bool, device=input.device)
        unread[column] = True
        return real(input.masked_fill(unread, float("-inf")), dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    torch.nn.functional.softmax = forced
    try:
        yield
    finally:
        torch.nn.functional.softmax = real


def check_rows(c: torch.Tensor, n_layers: int, n: int) -> None:
    """The registry's contract: (L+1, n, n) float64, non-negative rows summing to 1, entry 0 the identity."""
    assert c.shape == (n_layers + 1, n, n) and c.dtype == torch.float64
    assert c.min() >= 0.0
    torch.testing.assert_close(c.sum(-1), torch.ones(n_layers + 1, n, dtype=torch.float64), atol=1e-10, rtol=0)
    torch.testing.assert_close(c[0], torch.eye(n, dtype=torch.float64), atol=1e-10, rtol=0)


def with_random_biases(lm, seed: int = 0, scale: float = 0.1):
    """``lm`` (a fresh model: changed in place) with every bias, LayerNorm shifts included, drawn from
    N(0, scale²), as a trained model has them. The tiny models start with all biases zero; then every layer's
    LayerNorm input scales with x, LayerNorm is scale-invariant, and h(αx) does not move for α > 0 beyond
    about sqrt(eps): the path integrals of Integrated Gradients from the zero baseline see nothing there."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in lm.model.named_parameters():
            if name.endswith("bias"):
                p.copy_(scale * torch.randn(p.shape, generator=g))
    return lm
