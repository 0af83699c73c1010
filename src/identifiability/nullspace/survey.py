"""Surveys over heads and lengths: null-space dimensions of every head, the margins around the d_s = d_v + 1
threshold, constructed and realisable alternatives per head, and the realisable search by length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch
from tqdm import tqdm

from ..base.linalg import numerical_rank, one_thread, rank_rtol
from ..models.trace import layer_index, transform
from .common import rel_output_error, tv_rows, visible_mask
from .constructions import construct_alternative, left_null_basis, max_tv_alternative
from .realisability import (
    expected_dimension,
    local_solution_dimension,
    max_entropy_alternative,
    realisability,
    search_realisable,
)


@one_thread
def head_spectra(values: torch.Tensor, w_o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Singular values of T = V W_O and of the augmented [T, c 1], for many heads at once.

    Args:
        values: (..., d_s, d_v) value vectors V_h (float64).
        w_o: (..., d_v, d) output-projection blocks W_O^h (float64), broadcastable against ``values``.

    Returns:
        (s_T, s_T1, c): s_T (..., min(d_s, d_v)) singular values of T; s_T1 (..., min(d_s, d_v + 1)) those of
        [T, c 1] with c = s_max(T) / sqrt(d_s), so the ones column is as long as T's largest direction (rank is
        scale-free, a relative tolerance is not); c (...,).

    Why not ``svdvals(T)`` directly: T is (d_s, d) with d_s up to 512 and d = 384, 72 heads per sentence. With a QR
    [V, 1] = Q R (Q orthonormal) and W_O^T = Q_w R_w, T = Q (R[:, :d_v] R_w^T) Q_w^T, so T and the small
    R[:, :d_v] R_w^T have identical singular values (orthogonal invariance), and likewise [T, c 1] and
    [R[:, :d_v] R_w^T, c R[:, d_v]]. That is exact algebra and costs microseconds; a test checks it against
    a direct SVD of T.
    """
    v = values.double()
    w = w_o.double()
    ones = torch.ones(*v.shape[:-1], 1, dtype=v.dtype)
    _, r = torch.linalg.qr(torch.cat([v, ones], -1))  # r: (..., k, d_v + 1), k = min(d_s, d_v + 1)
    _, rw = torch.linalg.qr(w.mT)  # (..., d_v, d_v): W_O = rw^T Q_w^T
    core = r[..., :, :-1] @ rw.mT  # (..., k, d_v): same singular values as T
    s_t = torch.linalg.svdvals(core)[..., : min(v.shape[-2], v.shape[-1])]
    c = s_t[..., 0] / math.sqrt(v.shape[-2])
    s_t1 = torch.linalg.svdvals(torch.cat([core, c[..., None, None] * r[..., :, -1:]], -1))
    return s_t, s_t1, c


@one_thread
def null_space_table(traces, w_o: torch.Tensor, rtol: float | None = None, progress: bool = True) -> pd.DataFrame:
    """rank(T), dim LN(T), rank([T,1]), dim LN([T,1]) for every text, layer and head.

    Args:
        traces: SentenceTraces from a float64 forward pass (see :func:`float64`).
        w_o: (L, H, d_v, d) output-projection blocks.

    Returns a DataFrame with one row per (text, layer, head): ``text``, ``d_s``, ``layer`` (1..L), ``head``,
    ``rank_T``, ``dim_LN_T``, ``rank_T1``, ``dim_LN_T1``, the rank-nullity bounds ``bound_T`` = max(0, d_s - d_v)
    and ``bound_T1`` = max(0, d_s - d_v - 1), and the gap around the tolerance: ``kept_min`` (smallest singular
    value counted, relative) and ``dropped_max`` (largest one not counted, relative; NaN if none), for T and [T,1].

    rank(T) comes from a direct SVD of the (d_s, d) matrix T, so its d_s - d_v structural zeros are measured
    (they show up at ~1e-16: the gap). [T, 1] uses the exact reduction of :func:`head_spectra`, which only
    produces the min(d_s, d_v + 1) singular values that can be non-zero.
    """
    rows = []
    d_v = w_o.shape[-2]
    for i, tr in enumerate(tqdm(traces, desc="null spaces", unit="text", disable=not progress)):
        if tr.values.dtype != torch.float64:
            raise ValueError("null_space_table needs float64 traces: trace inside `with float64(lm):`")
        _, s_t1, _ = head_spectra(tr.values, w_o)  # (L, H, k)
        s_t = torch.linalg.svdvals(transform(tr.values, w_o.double()))  # (L, H, min(d_s, d))
        n = tr.n_tokens
        rel_t, rel_t1 = s_t / s_t[..., :1], s_t1 / s_t1[..., :1]
        d = w_o.shape[-1]
        r_t = numerical_rank(s_t, rank_rtol(n, d, torch.float64) if rtol is None else rtol)
        r_t1 = numerical_rank(s_t1, rank_rtol(n, d + 1, torch.float64) if rtol is None else rtol)
        L, H = r_t.shape
        for layer in range(L):
            for head in range(H):
                a, b = int(r_t[layer, head]), int(r_t1[layer, head])
                rt, rt1 = rel_t[layer, head], rel_t1[layer, head]
                rows.append(
                    dict(
                        text=i,
                        d_s=n,
                        layer=layer + 1,
                        head=head,
                        rank_T=a,
                        dim_LN_T=n - a,
                        rank_T1=b,
                        dim_LN_T1=n - b,
                        bound_T=max(0, n - d_v),
                        bound_T1=max(0, n - d_v - 1),
                        kept_min_T=float(rt[a - 1]),
                        dropped_max_T=float(rt[a]) if a < len(rt) else float("nan"),
                        kept_min_T1=float(rt1[b - 1]),
                        dropped_max_T1=float(rt1[b]) if b < len(rt1) else float("nan"),
                    )
                )
    return pd.DataFrame(rows)


@one_thread
def head_survey(
    a_all: torch.Tensor,
    values: torch.Tensor,
    w_o: torch.Tensor,
    d_q: int,
    causal: bool = False,
    rounds: int = 1,
    progress: bool = True,
) -> pd.DataFrame:
    """For every head of one sentence: how far an output-preserving alternative can move (LP, the paper's
    row-stochastic alternatives) and how far a *realisable* one does (the max-entropy alternative).

    Args:
        a_all: (L, H, d_s, d_s) attention, values: (L, H, d_s, d_v), w_o: (L, H, d_v, d), all float64.

    Returns one row per (layer (1..L), head): ``lp_tv_mean``/``lp_tv_max`` (over query rows) and ``lp_error``
    (relative output error), ``me_tv_mean``/``me_tv_max``/``me_error``, and ``me_rank`` (rank of the centred log
    of the max-entropy alternative; None for causal models), and whether the real A and the paper's constructed
    alternative (full step and half step) pass the exact realisability test (``a_realisable``,
    ``paper_full_realisable``, ``paper_half_realisable``; None for causal models). The LP is also started from the
    keys the max-entropy alternative gains on (only from there, to halve the cost), so ``lp_tv`` >= ``me_tv`` row by row
    up to the LP solver's feasibility tolerance (~1e-7).
    """
    L, H, n, _ = a_all.shape
    vis = visible_mask(n, True) if causal else None
    rows = []
    for layer, head in tqdm(
        [(li, h) for li in range(L) for h in range(H)], desc="alternatives per head", unit="head", disable=not progress
    ):
        a = a_all[layer, head].double()
        t = transform(values[layer, head], w_o[layer, head].double())
        me = max_entropy_alternative(a, t, d_q, causal)
        lp, tv = max_tv_alternative(a, t, vis, rounds=rounds, starts=[me["a_alt"] > a], top_start=False)
        me_tv = tv_rows(a, me["a_alt"])
        real = realisability(d_q=d_q, log_probs=me["log_a_alt"], causal=causal)
        # the paper's construction, at the full step and half of it: realisable or not (the review's objection)
        paper, _ = construct_alternative(a, t, vis, seed=layer * H + head)
        paper_real = [realisability(a + s * (paper - a), d_q, causal=causal).realisable for s in (1.0, 0.5)]
        rows.append(
            dict(
                layer=layer + 1,
                head=head,
                d_s=n,
                lp_tv_mean=float(tv.mean()),
                lp_tv_max=float(tv.max()),
                lp_error=rel_output_error(a, lp, t),
                me_tv_mean=float(me_tv.mean()),
                me_tv_max=float(me_tv.max()),
                me_error=rel_output_error(a, me["a_alt"], t),
                me_rank=real.rank,
                a_realisable=realisability(a, d_q, causal=causal).realisable,
                paper_full_realisable=paper_real[0],
                paper_half_realisable=paper_real[1],
            )
        )
    return pd.DataFrame(rows)


@one_thread
def threshold_margins(values: torch.Tensor, w_o: torch.Tensor, rtol: float | None = None) -> pd.DataFrame:
    """For a sentence of d_s = d_v + 1 tokens, per head: rank([T, 1]) (= d_s means the linear system
    A'[T, 1] = A[T, 1] has only the solution A' = A), its smallest relative singular value (how far from
    degenerate), and |x·1| / (||x|| sqrt(d_s)) for x spanning LN(T) (0 would mean the ones vector is orthogonal
    to LN(T), the non-generic case in which a perturbation survives).

    Args: values (L, H, d_s, d_v) and w_o (L, H, d_v, d), float64.
    """
    L, H, n, _ = values.shape
    _, s_t1, _ = head_spectra(values, w_o)
    rows = []
    for layer in range(L):
        for head in range(H):
            t = transform(values[layer, head], w_o[layer, head].double())
            ln = left_null_basis(t, rtol, augmented=False)
            cos = float(ln.sum(0).norm() / math.sqrt(n)) if ln.shape[1] else float("nan")
            s1 = s_t1[layer, head]
            rows.append(
                dict(
                    layer=layer + 1,
                    head=head,
                    d_s=n,
                    dim_LN_T=ln.shape[1],
                    rank_T1=int(numerical_rank(s1, rank_rtol(n, t.shape[1] + 1, t.dtype) if rtol is None else rtol)),
                    sigma_min_T1=float(s1[-1] / s1[0]),
                    ones_in_LN_T=cos,
                )
            )
    return pd.DataFrame(rows)


def unique_share(margins: pd.DataFrame, margin: float | None) -> float:
    """Share of (input, head) rows of :func:`threshold_margins` with rank([T,1]) = d_s (A is the only
    row-stochastic matrix with its output) and, unless ``margin`` is None, the smallest relative singular
    value of [T,1] above ``margin``."""
    full = margins.rank_T1 == margins.d_s
    if margin is not None:
        full &= margins.sigma_min_T1 > margin
    return float(full.mean())


@one_thread
def search_by_length(
    traces,
    w_o: torch.Tensor,
    heads: Sequence[tuple[int, int]],
    d_q: int,
    causal: bool = False,
    steps: int = 30,
    lp_rounds: int = 1,
    jacobian_max_length: int = 0,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict]:
    """Realisable alternatives for the given heads on texts of increasing length.

    For each trace (one d_s each) and (layer, head) of ``heads`` (layers 1..L): the max-entropy alternative, the
    optimiser's
    (:func:`search_realisable`, ``steps`` Adam steps from the max-entropy point), the LP's row-stochastic
    alternative (the linear set the paper works with; started from the keys the search's alternative gains on,
    so it is at least as far), the dimension counts, and, for d_s <= ``jacobian_max_length`` (bidirectional heads only),
    the measured local dimension of the realisable solution set.

    Returns (table, details) with details[(d_s, layer, head)] = dict(me=..., search=SearchResult).
    """
    rows, details = [], {}
    jobs = [(tr, li, h) for tr in traces for (li, h) in heads]
    for tr, layer, head in tqdm(jobs, desc="realisable search", unit="run", disable=not progress):
        n = tr.n_tokens
        i = layer_index(layer, tr.attentions.shape[0])
        a = tr.attentions[i, head].double()
        t = transform(tr.values[i, head], w_o[i, head].double())
        vis = visible_mask(n, True) if causal else None
        s_t, s_t1, _ = head_spectra(tr.values[i, head], w_o[i, head])
        r_t = int(numerical_rank(s_t, rank_rtol(n, t.shape[1], torch.float64)))
        r_t1 = int(numerical_rank(s_t1, rank_rtol(n, t.shape[1] + 1, torch.float64)))
        me = max_entropy_alternative(a, t, d_q, causal)
        sr = search_realisable(a, t, d_q, causal=causal, steps=steps)
        # started from the keys the search's alternative gains on: then LP >= search >= max-entropy, row-mean-wise
        lp, lp_tv = max_tv_alternative(a, t, vis, rounds=lp_rounds, starts=[sr.a_alt > a], top_start=False)
        me_tv = tv_rows(a, me["a_alt"])
        real = realisability(d_q=d_q, log_probs=torch.log_softmax(sr.q @ sr.k.T / math.sqrt(d_q), -1), causal=causal)
        row = dict(
            d_s=n,
            layer=layer,
            head=head,
            rank_T=r_t,
            dim_LN_T1=n - r_t1,
            expected_dim=expected_dimension(n, d_q, r_t1),
            naive_dim=max(0, d_q * (n - d_q)),
            lp_tv_mean=float(lp_tv.mean()),
            lp_tv_max=float(lp_tv.max()),
            me_tv_mean=float(me_tv.mean()),
            me_tv_max=float(me_tv.max()),
            me_error=rel_output_error(a, me["a_alt"], t),
            search_tv_mean=sr.tv_mean,
            search_tv_max=sr.tv_max,
            search_error=sr.rel_output_error,
            search_rank=real.rank,
            search_rejected=sr.rejected_steps,
            min_prob_A=float(a[vis].min() if vis is not None else a.min()),
            min_prob_me=float(me["a_alt"][vis].min() if vis is not None else me["a_alt"].min()),
            min_prob_search=float(sr.a_alt[vis].min() if vis is not None else sr.a_alt.min()),
            local_dim=None,
            jacobian_full_row_rank=None,
        )
        if not causal and d_q + 1 <= n <= jacobian_max_length:
            loc = local_solution_dimension(a, t, d_q)
            row.update(local_dim=loc["dimension"], jacobian_full_row_rank=loc["full_row_rank"])
        rows.append(row)
        details[(n, layer, head)] = dict(me=me, search=sr)
    return pd.DataFrame(rows), details
