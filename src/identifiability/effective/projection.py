"""Effective attention (Brunner et al. 2020, Section 3.4), batched over sentences, layers and heads.

A head's output is ``A_h @ T_h`` with ``T_h = V_h W_O^h`` (the paper's T = E W_V H), shape (d_s, d).
Any row component of ``A_h`` in the left null space LN(T_h) has no effect on that output, so the paper
splits the attention matrix into

    A_eff = A - Proj_LN(T)(A) = A U Uᵀ      (U: an orthonormal basis of col(T), shape (d_s, r))
    null  = A - A_eff = Proj_LN(T)(A)

and calls A_eff the *effective attention*. Invariants (tested): ``A_eff T = A T``; projecting A_eff
again changes nothing; ``A_eff = A`` exactly when LN(T) is empty (generically when d_s <= d_v).

How it is computed here, and why:

- col(T) = col(V_h W_O^h). When the head's block W_O^h (d_v, d) has rank d_v, col(T) = col(V_h),
  so the d_s x d_v value matrix is decomposed instead of the d_s x d matrix T (12x smaller for MiniLM).
  When W_O^h is rank deficient, col(T) can be smaller than col(V_h): such heads are detected and their
  V_h is first multiplied by the projector onto W_O^h's row space, which gives a matrix with exactly
  col(T) as column space (see :func:`out_proj_row_space`).
- The rank of that matrix is decided by the book's one rank rule (:mod:`identifiability.base.linalg`): a
  *relative* tolerance ``rtol * s_max`` with ``rtol = max(d_s, d_v) * eps``, in the precision it was formed in:
  an absolute tolerance, or forming in float32 and decomposing in float64, makes rounding noise look like
  signal (full rank, A_eff = A everywhere).
- Sentences of different lengths are padded and masked: padded rows of V_h are zeroed (so padding is not
  part of T) and padded rows/columns of A are zeroed; one batched SVD covers every sentence, layer and head.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from ..base.linalg import one_thread, rank_rtol
from ..corpus.corpora import token_lengths
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, out_proj_weights, trace_batch, transform
from . import nulls

# --------------------------------------------------------------------------------------------------
# The decomposition
# --------------------------------------------------------------------------------------------------


def out_proj_row_space(
    w_o: torch.Tensor, dtype: torch.dtype = torch.float32, rtol: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Projector onto the row space of every head's output-projection block, and that block's rank.

    ``col(V_h W_O^h) = col(V_h P_h)`` with P_h the orthogonal projector onto the row space of W_O^h, because
    ``W_O^h = P_h W_O^h``. Where W_O^h has full rank d_v, P_h is returned as the exact identity so those
    heads' values pass through bit for bit.

    Args:
        w_o: (L, H, d_v, d) blocks W_O^h.
        dtype: precision of the decomposition.
        rtol: relative singular-value tolerance; default ``max(d_v, d) * eps``.

    Returns:
        proj (L, H, d_v, d_v) and rank (L, H) (int64).
    """
    d_v, d = w_o.shape[-2:]
    rtol = rank_rtol(d_v, d, dtype) if rtol is None else rtol
    with one_thread():
        # SVD of the tall W_O^hᵀ (faster than of the wide W_O^h); its right vectors are W_O^h's left ones.
        _, s, vh = torch.linalg.svd(w_o.to(dtype).mT, full_matrices=False)
    u = vh.mT  # (L, H, d_v, d_v)
    keep = s > rtol * s[..., :1]
    rank = keep.sum(-1)
    uk = u * keep.unsqueeze(-2).to(dtype)
    proj = uk @ uk.mT
    eye = torch.eye(d_v, dtype=dtype).expand_as(proj)
    return torch.where((rank == d_v)[..., None, None], eye, proj), rank


@dataclass
class EffectiveBatch:
    """Effective attention of a padded batch.

    Attributes:
        effective: (B, L, H, n_pad, n_pad) A_eff (zero on padding).
        null: (B, L, H, n_pad, n_pad) A - A_eff, the part of A in LN(T).
        rank: (B, L, H) dim col(T); dim LN(T) = length - rank.
        lengths: (B,) true token counts.
    """

    effective: torch.Tensor
    null: torch.Tensor
    rank: torch.Tensor
    lengths: torch.Tensor


def effective_padded(
    attn: torch.Tensor,
    values: torch.Tensor,
    lengths: torch.Tensor | Sequence[int],
    w_o: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    rtol: float | None = None,
    row_space: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> EffectiveBatch:
    """A_eff and the null part for every sentence, layer and head of a padded batch, in one SVD call.

    Args:
        attn: (B, L, H, n_pad, n_pad) attention probabilities (rows: queries), padded to n_pad.
        values: (B, L, H, n_pad, d_v) value vectors V_h (value bias included), padded.
        lengths: (B,) number of real tokens of each sentence (padding comes after them).
        w_o: (L, H, d_v, d) output-projection blocks. Needed to detect heads whose W_O^h is rank
            deficient (then col(T) is smaller than col(V_h)); None assumes every block has full rank.
        dtype: precision in which the matrix is formed *and* decomposed (float32 default, float64 on request).
        rtol: relative singular-value tolerance; default ``max(length, d_v) * eps(dtype)`` per sentence.
        row_space: ``out_proj_row_space(w_o, dtype)`` if already computed (it is the same for every batch).
    """
    B, L, H, n_pad, _ = attn.shape
    d_v = values.shape[-1]
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    a = attn.to(dtype)
    m = values.to(dtype)
    if bool((lengths < n_pad).any()):  # mask padding (one pass each; skipped when nothing is padded)
        valid = torch.arange(n_pad)[None, :] < lengths[:, None]  # (B, n_pad)
        pair = valid[:, None, None, :, None] & valid[:, None, None, None, :]
        a = a.masked_fill(~pair, 0.0)
        m = m.masked_fill(~valid[:, None, None, :, None], 0.0)  # padding is not part of T
    if w_o is not None or row_space is not None:
        proj, wo_rank = row_space if row_space is not None else out_proj_row_space(w_o, dtype)
        deficient = wo_rank < d_v  # (L, H)
        if bool(deficient.any()):
            m = torch.where(deficient[None, :, :, None, None], m @ proj, m)
    with one_thread():
        u, s, _ = torch.linalg.svd(m, full_matrices=False)  # u (B, L, H, n_pad, k), k = min(n_pad, d_v)
    if rtol is None:
        tol = torch.tensor([rank_rtol(int(n), d_v, dtype) for n in lengths], dtype=dtype)[:, None, None, None]
    else:
        tol = torch.tensor(rtol, dtype=dtype)
    keep = s > tol * s[..., :1]  # s_max = 0 (T = 0) keeps nothing: then everything is null
    rank = keep.sum(-1)
    # LN(T) empty: the projection is the identity; return A itself, not A up to rounding.
    empty = rank >= lengths[:, None, None]  # (B, L, H)
    if bool(empty.all()):  # every head of every sentence (short sentences): no projection needed
        return EffectiveBatch(effective=a.clone(), null=torch.zeros_like(a), rank=rank, lengths=lengths)
    uk = u * keep.unsqueeze(-2).to(dtype)
    eff = (a @ uk) @ uk.mT
    if bool(empty.any()):
        eff[empty] = a[empty]
    return EffectiveBatch(effective=eff, null=a - eff, rank=rank, lengths=lengths)


@dataclass
class Effective:
    """One sentence's effective attention, padding removed.

    Attributes:
        effective: (L, H, d_s, d_s) A_eff.
        null: (L, H, d_s, d_s) A - A_eff.
        rank: (L, H) dim col(T).
    """

    effective: torch.Tensor
    null: torch.Tensor
    rank: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return self.effective.shape[-1]

    @property
    def null_dim(self) -> torch.Tensor:
        """(L, H) dim LN(T) = d_s - rank(T)."""
        return self.n_tokens - self.rank


def pad_traces(traces: Sequence[SentenceTrace]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack traces of different lengths: attn (B, L, H, n_pad, n_pad), values (B, L, H, n_pad, d_v), lengths (B,)."""
    lengths = torch.tensor([tr.n_tokens for tr in traces])
    if len(traces) == 1:  # nothing to pad: views, no copies
        return traces[0].attentions[None], traces[0].values[None], lengths
    n_pad = int(lengths.max())
    L, H, _, d_v = traces[0].values.shape
    attn = torch.zeros(len(traces), L, H, n_pad, n_pad, dtype=traces[0].attentions.dtype)
    vals = torch.zeros(len(traces), L, H, n_pad, d_v, dtype=traces[0].values.dtype)
    for b, tr in enumerate(traces):
        n = tr.n_tokens
        attn[b, :, :, :n, :n] = tr.attentions
        vals[b, :, :, :n] = tr.values
    return attn, vals, lengths


def length_groups(lengths: Sequence[int], max_cells: int, max_batch: int) -> list[list[int]]:
    """Indices sorted by length, cut into groups whose padded size B * n_pad^2 stays under ``max_cells``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups:
            g = groups[-1]
            s = lengths[i]  # the longest so far, as the order is ascending
            if len(g) < max_batch and (len(g) + 1) * s * s <= max_cells:
                g.append(i)
                continue
        groups.append([i])
    return groups


def effective_attention(
    traces: Sequence[SentenceTrace],
    w_o: torch.Tensor | None,
    dtype: torch.dtype = torch.float32,
    rtol: float | None = None,
    max_cells: int = 1 << 20,
    max_batch: int = 32,
    row_space: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[Effective]:
    """A_eff for every trace, batched: traces are grouped by length and each group is padded once.

    Args:
        traces: sentence traces (any lengths).
        w_o: (L, H, d_v, d) from :func:`identifiability.models.trace.out_proj_weights` (None: assume full rank).
        dtype, rtol: see :func:`effective_padded`.
        max_cells: bound on B * n_pad^2 per group (memory: about 3 * L * H * max_cells numbers).
        row_space: precomputed ``out_proj_row_space(w_o, dtype)`` (saves one SVD of W_O per call).
    """
    out: list[Effective | None] = [None] * len(traces)
    if row_space is None and w_o is not None:
        row_space = out_proj_row_space(w_o, dtype)
    for g in length_groups([tr.n_tokens for tr in traces], max_cells, max_batch):
        attn, vals, lengths = pad_traces([traces[i] for i in g])
        res = effective_padded(attn, vals, lengths, None, dtype, rtol, row_space)
        for b, i in enumerate(g):
            n = int(lengths[b])
            # Views into the padded batch (no copies; the batch lives as long as its sentences do).
            out[i] = Effective(res.effective[b, :, :, :n, :n], res.null[b, :, :, :n, :n], res.rank[b])
    return out  # type: ignore[return-value]


def iter_effective(
    lm: LoadedModel,
    texts: Sequence[str],
    w_o: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    rtol: float | None = None,
    max_tokens: int | None = None,
    max_cells: int = 1 << 20,
    max_batch: int = 16,
    progress: bool = True,
    desc: str = "effective attention",
    value_bias: bool = True,
) -> Iterator[tuple[int, SentenceTrace, Effective]]:
    """Trace ``texts`` and compute their effective attention batch by batch, yielding
    ``(index into texts, trace, effective)`` in order of length; memory stays bounded by one batch.

    The forward pass and the decomposition share the same length groups, so padding stays small. With
    ``value_bias=False`` T is built from E W_V without b_V: the yielded traces' ``values`` are E W_V then.
    """
    texts = list(texts)
    w_o = out_proj_weights(lm) if w_o is None else w_o
    bias = None if value_bias else nulls.value_bias(lm)
    lengths = token_lengths(texts, lm.tokenizer)
    limit = min(max_tokens or lm.max_positions, lm.max_positions)
    lengths = [min(n, limit) for n in lengths]
    groups = length_groups(lengths, max_cells, max_batch)
    row_space = out_proj_row_space(w_o, dtype)
    for g in tqdm(groups, desc=desc, unit="batch", disable=not progress or len(groups) < 2):
        trs = trace_batch(lm, [texts[i] for i in g], max_tokens)
        if bias is not None:
            trs = [replace(tr, values=nulls.without_value_bias(tr.values, bias)) for tr in trs]
        yield from zip(g, trs, effective_attention(trs, w_o, dtype, rtol, max_cells, len(g), row_space))


# --------------------------------------------------------------------------------------------------
# Per-head reference (tests, benchmark): decompose T itself, one head at a time
# --------------------------------------------------------------------------------------------------


def reference_effective(
    attn: torch.Tensor, transform: torch.Tensor, dtype: torch.dtype = torch.float64, rtol: float | None = None
) -> tuple[torch.Tensor, int]:
    """The definition, for one head: project each row of A onto col(T) via an SVD of T.

    Args:
        attn: (d_s, d_s) A_h.
        transform: (d_s, d) T_h = V_h W_O^h, formed in ``dtype`` by the caller.
    Returns:
        (A_eff (d_s, d_s), rank of T).
    """
    t = transform.to(dtype)
    u, s, _ = torch.linalg.svd(t, full_matrices=False)
    rtol = rank_rtol(*t.shape, dtype) if rtol is None else rtol
    r = int((s > rtol * s[0]).sum()) if s.numel() and s[0] > 0 else 0
    if r >= t.shape[0]:
        return attn.to(dtype).clone(), r
    ur = u[:, :r]
    return attn.to(dtype) @ ur @ ur.T, r


def effective_loop(
    tr: SentenceTrace, w_o: torch.Tensor, dtype: torch.dtype = torch.float64, rtol: float | None = None
) -> Effective:
    """Per-head Python loop over layers and heads, forming T = V_h W_O^h in ``dtype`` (the baseline)."""
    L, H = w_o.shape[:2]
    eff = torch.empty(L, H, tr.n_tokens, tr.n_tokens, dtype=dtype)
    rank = torch.empty(L, H, dtype=torch.long)
    for layer in range(L):
        for h in range(H):
            t = transform(tr.values[layer, h], w_o[layer, h].to(dtype))
            eff[layer, h], rank[layer, h] = reference_effective(tr.attentions[layer, h], t, dtype, rtol)
    return Effective(eff, tr.attentions.to(dtype) - eff, rank)


# --------------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------------


def pearson(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of two (..., n_pad, n_pad) matrices over their n_pad^2 entries, batched: returns (...)."""
    x = a.double().flatten(-2)  # float64 sums: identical matrices give exactly 1, not 1 - 1e-6
    y = b.double().flatten(-2)
    x = x - x.mean(-1, keepdim=True)
    y = y - y.mean(-1, keepdim=True)
    return (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)).clamp_min(1e-300)


def pearson_projected(a: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Pearson(A, A Q Qᵀ) for (..., n, n) matrices A and (..., n, r) Q with orthonormal (or zero) columns,
    from the n x r product A Q alone: with B = A Q Qᵀ, the sums that Pearson needs are sum(A∘B) = sum(B²) =
    ||A Q||², sum(B) = (1ᵀ A Q)(Qᵀ 1) and A's own. Returns (...), in float64."""
    a, q = a.double(), q.double()
    big_n = a.shape[-1] ** 2
    aq = a @ q
    s_a, s_b = a.sum((-2, -1)), (aq.sum(-2) * q.sum(-2)).sum(-1)
    ab, aa = aq.square().sum((-2, -1)), a.square().sum((-2, -1))
    cov, var_a, var_b = ab - s_a * s_b / big_n, aa - s_a**2 / big_n, ab - s_b**2 / big_n
    return cov / (var_a * var_b).clamp_min(1e-300).sqrt()


def length_grid(d_v: int, max_length: int, n_lengths: int) -> list[int]:
    """Token lengths from 4 to ``max_length``, log-spaced, always including d_v and d_v + 1, 2."""
    grid = np.unique(np.round(np.geomspace(4, max_length, n_lengths)).astype(int))
    extra = [d for d in (d_v - 1, d_v, d_v + 1, d_v + 2) if 4 <= d <= max_length]
    return sorted(set(grid.tolist()) | set(extra))


def head_correlations(
    a: torch.Tensor, eff: Effective, random_weights: torch.Tensor | None = None, seed: int = 0
) -> dict[str, torch.Tensor]:
    """One input's measures of Figure 1 (a), per head, each (L, H): ``pearson`` (A, A_eff), ``pearson_random``
    (A, A projected onto a random subspace of the same rank, seeded by ``seed``), ``pearson_random_weights``
    (A, A projected onto col(T) of random value weights: ``random_weights``, an (L, H, d_s, r) orthonormal
    basis from :func:`identifiability.effective.nulls.value_basis`; NaN without it), ``null_dim`` (dim LN(T)) and
    ``null_share`` (||A - A_eff||_F / ||A||_F).

    Args:
        a: (L, H, d_s, d_s) raw attention; eff: its effective attention (:func:`effective_attention`).
    """
    nan = torch.full(a.shape[:-2], math.nan, dtype=torch.float64)
    return {
        "pearson": pearson(a, eff.effective),
        "pearson_random": pearson_projected(a, nulls.random_basis(a, eff.rank, seed)),
        "pearson_random_weights": nan if random_weights is None else pearson_projected(a, random_weights),
        "null_dim": eff.null_dim,
        "null_share": eff.null.double().flatten(-2).norm(dim=-1) / a.double().flatten(-2).norm(dim=-1),
    }


def head_rows(text: int, measures: dict[str, torch.Tensor]) -> pd.DataFrame:
    """One row per layer (1..L) and head of one input's :func:`head_correlations`, with its index and d_s."""
    L, H = measures["pearson"].shape
    li, hi = torch.meshgrid(torch.arange(L), torch.arange(H), indexing="ij")
    cols = {k: v.flatten().numpy() for k, v in measures.items()}
    return pd.DataFrame({"text": text, "layer": li.flatten().numpy() + 1, "head": hi.flatten().numpy(), **cols})


def correlation_by_length(
    lm: LoadedModel,
    texts: Sequence[str],
    dtype: torch.dtype = torch.float32,
    rtol: float | None = None,
    progress: bool = True,
    value_bias: bool = True,
    seed: int = 0,
    random_weights: bool = True,
) -> pd.DataFrame:
    """Figure 1 (a) of the paper, per head: Pearson correlation of A and A_eff for every text, beside the two
    null models of :mod:`identifiability.effective.nulls` (random weights drawn once with ``seed``; the random subspace
    seeded per text).

    Returns one row per (text, layer, head): ``text`` (index), ``d_s``, ``layer`` (1..L), ``head`` and the
    columns of :func:`head_correlations`.
    """
    rows = []
    if random_weights:
        w_v_rand, _ = nulls.random_value_weights(lm, seed)
        bias = nulls.value_bias(lm) if value_bias else None
    for i, tr, eff in iter_effective(
        lm, texts, dtype=dtype, rtol=rtol, progress=progress, desc="Figure 1", value_bias=value_bias
    ):
        a = tr.attentions.to(dtype)
        rw = nulls.value_basis(nulls.value_inputs(lm, tr), w_v_rand, bias) if random_weights else None
        measures = head_correlations(a, eff, rw, seed=seed * 100_003 + i)
        rows.append(head_rows(i, measures).assign(d_s=tr.n_tokens))
    cols = ["text", "d_s", "layer", "head", *measures]
    return pd.concat(rows, ignore_index=True)[cols].sort_values(["d_s", "text", "layer", "head"], ignore_index=True)
