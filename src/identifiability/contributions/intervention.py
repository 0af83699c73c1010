"""Token replacement: an intervention that shares nothing with gradients (issue 34, item 3).

Input token j's embedding x_j is replaced by a replacement r_j, the rest of x is left as it is, the model is
run again, and every hidden token's move is measured at every layer, relative to its size:

    a^l[i, j] = ||h~_i^{l, j} - h_i^l|| / ||h_i^l||,       c^l = a^l / Σ_j a^l[i, j]   (rows summing to 1),

with h~^{l, j} the hidden states when x_j is replaced. Dividing by ||h_i^l|| cancels in the normalised rows;
it makes the raw moves (:func:`replacement_moves`) comparable across tokens and layers. Where gradients read an
infinitesimal change, this reads a finite one: the answer to "what if token j were not there" that erasure
methods ask (Li, Monroe & Jurafsky 2016, "Understanding Neural Networks through Representation Erasure"; they
erase dimensions and words of the input and measure the change of the output, here of every hidden token at
every layer).

Replacements (each a (d_s, d) matrix: row j replaces x_j):

- ``"mean"`` (default): the mean input embedding at that position over a corpus, from
  :func:`mean_embedding` over its traces and passed as ``mean``; x includes position (and segment)
  embeddings, so the mean is taken per position. With no corpus given (the registered measure, called as
  ``fn(lm, trace)`` like every other), the mean over the sentence's own input embeddings, the same vector at
  every position: the sentence's average token, which keeps it on the scale of its neighbours (a zero vector
  is far off the LayerNormed embeddings' sphere), at the cost of ignoring positions.
- ``"mask"``: the embedding of the tokenizer's mask token at that position (what x is when the input id at
  position j is the mask token, with that position's and segment's embeddings); a
  :class:`NoMaskToken` error for a tokenizer without one (GPT-2's), naming the replacement that works.

Layer 0 is the identity (h^0 = x; only x_j moves). A token whose replacement equals it scores 0 as a
source at every layer: under the corpus mean, the first token of a model that starts every sentence with the
same special token (position 0 holds the same x in every sentence); the intervention cannot see what never
varies. One batched forward pass of d_s + 1 copies of the
sentence (copy 0 unaltered, copy k with x_{k-1} replaced; the x module's output is swapped by a forward
hook, as ``trace.from_x`` does) gives every layer at once: per sentence about d_s forward passes' worth of
arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..base.errors import UserError
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace
from .registry import normalise_rows, register
from .value_zeroing import sentence_inputs

REPLACEMENTS = ("mean", "mask")


class NoMaskToken(UserError, ValueError):
    """The "mask" replacement was asked of a model whose tokenizer has no mask token."""


def mean_embedding(traces: Sequence[SentenceTrace]) -> torch.Tensor:
    """The corpus's mean input embedding at each position: row p is the mean of x[p] over the traces with at
    least p + 1 tokens.

    Args:
        traces: traced sentences (any lengths).
    Returns:
        (max d_s, d) float32.
    """
    return _per_position_mean([t.x.unsqueeze(0) for t in traces])[0]


def mean_hidden(traces: Sequence[SentenceTrace]) -> torch.Tensor:
    """The corpus's mean hidden state of layers 0..L-1 at each position (the inputs of blocks 1..L, what
    :func:`identifiability.contributions.one_layer.intervention_layer` replaces a token by): entry [k, p] is
    the mean of hidden[k][p] over the traces with at least p + 1 tokens; entry 0 is :func:`mean_embedding`.

    Args:
        traces: traced sentences (any lengths) of one model with L layers.
    Returns:
        (L, max d_s, d) float32.
    """
    return _per_position_mean([t.hidden[:-1] for t in traces])


def _per_position_mean(rows: Sequence[torch.Tensor]) -> torch.Tensor:
    """(K, max n, d): the mean over ``rows`` ((K, n, d) each, any n) of row p where it exists."""
    if not rows:
        raise ValueError("no traces to average: pass at least one traced sentence")
    longest = max(r.shape[1] for r in rows)
    total = torch.zeros(rows[0].shape[0], longest, rows[0].shape[-1], dtype=torch.float64)
    count = torch.zeros(1, longest, 1, dtype=torch.float64)
    for r in rows:
        total[:, : r.shape[1]] += r.double()
        count[:, : r.shape[1]] += 1
    return (total / count).float()


@torch.no_grad()
def _x_of(lm: LoadedModel, enc: dict) -> torch.Tensor:
    """The x module's output for ``enc``, (B, d_s, d)."""
    store: list[torch.Tensor] = []
    hook = lm.adapter.x_module(lm.model).register_forward_hook(lambda _m, _i, o: store.append(o))
    try:
        lm.model(**enc)
    finally:
        hook.remove()
    return store[0]


def mask_embedding(lm: LoadedModel, trace: SentenceTrace) -> torch.Tensor:
    """x of the sentence with every input id replaced by the mask token's: row p is the mask token's
    embedding at position p (with the sentence's segment there), (d_s, d). Raises :class:`NoMaskToken` where
    the tokenizer has none."""
    mask_id = getattr(lm.tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise NoMaskToken(
            f"{lm.name} ({lm.adapter.family}) has no mask token, so the 'mask' replacement does not apply; "
            "use replacement='mean' (the default)"
        )
    enc = sentence_inputs(lm, trace)
    enc["input_ids"] = torch.full_like(enc["input_ids"], int(mask_id))
    return _x_of(lm, enc)[0]


@torch.no_grad()
def replacement_moves(lm: LoadedModel, trace: SentenceTrace, replacement: torch.Tensor) -> torch.Tensor:
    """How far each hidden token moves when one input token is replaced, before normalising rows.

    Args:
        lm: the model (any family of the registry).
        trace: one traced sentence.
        replacement: (d_s, d) or (d,): row j replaces x_j (a vector: the same at every position); rows past
            d_s of a longer (corpus) mean are ignored.
    Returns:
        (L+1, d_s, d_s) float64: entry [l, i, j] = ||h~_i^l - h_i^l|| / ||h_i^l|| with x_j replaced.
    """
    enc = sentence_inputs(lm, trace)
    n = enc["input_ids"].shape[1]
    batched = {k: v.expand(n + 1, n).contiguous() for k, v in enc.items()}
    x = _x_of(lm, enc)[0]  # (n, d)
    r = replacement.to(x.device, x.dtype)
    r = r.expand(n, -1) if r.dim() == 1 else r[:n]
    if r.shape != x.shape:
        raise ValueError(f"replacement must be ({n}, {x.shape[1]}) or ({x.shape[1]},), got {tuple(replacement.shape)}")
    xs = x.expand(n + 1, n, x.shape[1]).clone()
    k = torch.arange(n, device=x.device)
    xs[k + 1, k] = r  # copy k + 1 has x_k replaced
    hook = lm.adapter.x_module(lm.model).register_forward_hook(lambda _m, _i, _o: xs)
    try:
        hidden = torch.stack(lm.model(**batched, output_hidden_states=True).hidden_states, 1).double()
    finally:
        hook.remove()
    hidden[:, 0] = xs.double()  # e^0 = x, exact for every family (as trace_batch does)
    orig, alt = hidden[0], hidden[1:]  # (L+1, n_i, d), (n_j, L+1, n_i, d)
    moves = (alt - orig).norm(dim=-1) / orig.norm(dim=-1).clamp_min(1e-30)  # (n_j, L+1, n_i)
    return moves.permute(1, 2, 0).cpu()


def token_replacement(
    lm: LoadedModel, trace: SentenceTrace, replacement: str = "mean", mean: torch.Tensor | None = None
) -> torch.Tensor:
    """The intervention measure (module docstring): (L+1, d_s, d_s) float64, rows summing to 1, entry 0 the
    identity.

    Args:
        replacement: "mean" or "mask".
        mean: for "mean", the corpus's mean input embedding, (max d_s, d) from :func:`mean_embedding` or (d,);
            None: the mean over the sentence's own input embeddings.
    """
    if replacement not in REPLACEMENTS:
        raise ValueError(f"replacement must be one of {', '.join(REPLACEMENTS)}, got {replacement!r}")
    if replacement == "mask":
        rows = mask_embedding(lm, trace)
    else:
        rows = mean if mean is not None else trace.x.double().mean(0).float()
    c = normalise_rows(replacement_moves(lm, trace, rows))
    c[0] = torch.eye(c.shape[-1], dtype=c.dtype)  # h^0 = x: so by definition, even where r_j = x_j moved nothing
    return c


@register("intervention", "Token replacement", "li2016understanding", per_layer=False, kind="intervention")
def intervention(lm: LoadedModel, trace: SentenceTrace) -> torch.Tensor:
    """:func:`token_replacement` with its defaults: each x_j replaced by the sentence's mean input embedding."""
    return token_replacement(lm, trace)
