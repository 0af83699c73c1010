"""Corpus statistics of Hidden Token Attribution for chapter 6 (paper figures 3, 4, 18, 25, 26–37).

Results in, pandas data frames out; the figures that draw them are in :mod:`identifiability.charts.context_mixing`.
Layers are numbered as hidden states: layer l ≥ 1 is the output of the l-th layer (layer 0, x itself, is
left out of every statistic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from .result import HTAResult

if TYPE_CHECKING:  # pandas is imported where it is used: importing the package stays light
    import pandas as pd


def token_table(results: Sequence[HTAResult], tags: Sequence[Sequence[str]] | None = None) -> pd.DataFrame:
    """One row per (sentence, layer ≥ 1, hidden token) with what the figures aggregate.

    Columns: sentence, layer, position, n_tokens, token, special, tag (POS tag if given, else ""),
    own (c[l, i, i], the input token's share in its own hidden token), top (max_j c[l, i, j]),
    top_position, top_is_self.
    """
    import pandas as pd

    frames = []
    for s, r in enumerate(results):
        c = r.c[1:]  # (L, n, n) float64
        L, n, _ = c.shape
        own = torch.diagonal(c, dim1=-2, dim2=-1)  # (L, n)
        top, arg = c.max(-1)
        tag = list(tags[s]) if tags is not None else [""] * n
        if len(tag) != n:
            raise ValueError(f"sentence {s}: {len(tag)} POS tags for {n} tokens (tokenised differently?)")
        frames.append(
            pd.DataFrame(
                {
                    "sentence": s,
                    "layer": torch.arange(1, L + 1).repeat_interleave(n).numpy(),
                    "position": torch.arange(n).repeat(L).numpy(),
                    "n_tokens": n,
                    "token": r.tokens * L,
                    "special": (r.special or [False] * n) * L,
                    "tag": tag * L,
                    "own": own.flatten().numpy(),
                    "top": top.flatten().numpy(),
                    "top_position": arg.flatten().numpy(),
                    "top_is_self": (arg == torch.arange(n)).flatten().numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def layer_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer: quantiles of the own-token share, the median share of the top contributor and the
    percentage of hidden tokens whose top contributor is their own input token (paper Fig 3a/3b)."""
    g = table.groupby("layer")
    out = g["own"].quantile([0.05, 0.25, 0.5, 0.75, 0.95]).unstack()
    out.columns = ["own_p05", "own_q1", "own_median", "own_q3", "own_p95"]
    out["top_median"] = g["top"].median()
    out["top_is_self_pct"] = 100 * g["top_is_self"].mean()
    out["tokens"] = g.size()
    return out.reset_index()


def _hidden_kept(r: HTAResult, skip_special: bool) -> torch.Tensor:
    """(n,) bool: the hidden tokens a statistic counts (every one, or all but the special tokens)."""
    if skip_special and r.special:
        return torch.tensor([not s for s in r.special])
    return torch.ones(r.n_tokens, dtype=torch.bool)


def cross_segment(results: Sequence[HTAResult], skip_special: bool = True) -> pd.DataFrame:
    """On sentence pairs: per layer, the mean share of a hidden token's contributions that comes from the
    *other* segment (does context cross the boundary?), next to what uniform mixing would give (the other
    segment's share of the tokens). The first segment ends at the first special token inside the input
    (the middle separator); inputs without one (single sentences) are skipped.

    Returns rows ``layer`` (1..L), ``share``, ``uniform``, ``pairs``.
    """
    import pandas as pd

    rows = []
    for r in results:
        inner = [k for k, s in enumerate(r.special) if s and 0 < k < r.n_tokens - 1]
        if not inner:
            continue
        seg = (torch.arange(r.n_tokens) > inner[0]).long()
        other = (seg[:, None] != seg[None, :]).to(r.c.dtype)  # (d_s, d_s)
        keep = _hidden_kept(r, skip_special)
        share = (r.c * other).sum(-1)[:, keep]  # (L+1, kept)
        uniform = float((other.sum(-1) / r.n_tokens)[keep].mean())
        for layer in range(1, r.c.shape[0]):
            rows.append({"layer": layer, "share": float(share[layer].mean()), "uniform": uniform})
    df = pd.DataFrame(rows, columns=["layer", "share", "uniform"])
    out = df.groupby("layer").mean().reset_index()
    out["pairs"] = df.groupby("layer").size().values if len(df) else []
    return out


def distance_profile(results: Sequence[HTAResult], max_offset: int = 10, skip_special: bool = True) -> pd.DataFrame:
    """Contribution by relative position k = j − i of the input token (paper Fig 4).

    Per layer and offset: ``mean_c`` = mean of c[l, i, i+k] over hidden tokens i that have a token at
    offset k (the own token at k = 0); ``share`` = Σ_i c[l, i, i+k] / number of hidden tokens, the part
    of all contribution that comes from offset k (summed over every k it is 1; offsets beyond
    ``max_offset`` are pooled into ±(max_offset+1)); ``context_share`` = the same over the non-self
    contribution only. With ``skip_special`` the special tokens are left out as hidden tokens (their
    context is studied separately).
    """
    import pandas as pd

    K = max_offset
    L = results[0].S.shape[0] - 1
    tot = torch.zeros(L, 2 * K + 3, dtype=torch.float64)  # offsets -(K+1)..K+1, the ends pooled
    cnt = torch.zeros(L, 2 * K + 3, dtype=torch.float64)
    rows = 0
    for r in results:
        c = r.c[1:]
        n = c.shape[-1]
        keep = _hidden_kept(r, skip_special)
        i = torch.arange(n).reshape(-1, 1).expand(n, n)
        k = (torch.arange(n).reshape(1, -1) - i).clamp(-K - 1, K + 1) + K + 1
        sel = keep.reshape(-1, 1).expand(n, n)
        idx = k[sel]
        for layer in range(L):
            tot[layer].index_add_(0, idx, c[layer][sel])
        cnt.index_add_(1, idx, torch.ones(L, idx.numel(), dtype=torch.float64))
        rows += int(keep.sum())
    offsets = list(range(-K - 1, K + 2))
    share = tot / max(rows, 1)
    context = share.clone()
    context[:, K + 1] = 0
    context = context / context.sum(1, keepdim=True).clamp_min(1e-300)
    # the ends pool every farther offset: their mean_c is not a per-offset mean, so it is left out
    mean_c = (tot / cnt.clamp_min(1)).where(cnt > 0, torch.full_like(tot, float("nan")))
    mean_c[:, 0] = mean_c[:, -1] = float("nan")
    return pd.DataFrame(
        [
            {
                "layer": layer + 1,
                "offset": o,
                "mean_c": float(mean_c[layer, m]),
                "share": float(share[layer, m]),
                "context_share": float(context[layer, m]),
            }
            for layer in range(L)
            for m, o in enumerate(offsets)
        ]
    )


def locality(results: Sequence[HTAResult], radius: int = 3, far: int = 8, skip_special: bool = True) -> pd.DataFrame:
    """Per layer: the part of the context (non-self) contribution that comes from within ``radius``
    tokens, and from farther than ``far`` tokens, next to what uniform mixing over the other tokens of
    the same sentences would give (the baseline that says whether "local" means anything)."""
    import pandas as pd

    L = results[0].S.shape[0] - 1
    near, distant = torch.zeros(L, dtype=torch.float64), torch.zeros(L, dtype=torch.float64)
    base_near = base_far = 0.0
    rows = 0
    for r in results:
        c = r.c[1:]
        n = c.shape[-1]
        keep = _hidden_kept(r, skip_special)
        dist = (torch.arange(n).reshape(1, -1) - torch.arange(n).reshape(-1, 1)).abs()
        ctx = c * (dist > 0)
        ctx = ctx / ctx.sum(-1, keepdim=True).clamp_min(1e-300)
        m_near, m_far = ((dist > 0) & (dist <= radius)), dist > far
        near += (ctx * m_near).sum(-1)[:, keep].sum(-1)
        distant += (ctx * m_far).sum(-1)[:, keep].sum(-1)
        # uniform mixing over every other token (causal models: over the earlier ones)
        visible = (c[-1] > 0) & (dist > 0)
        others = visible.sum(-1).clamp_min(1).double()
        base_near += float(((visible & m_near).sum(-1) / others)[keep].sum())
        base_far += float(((visible & m_far).sum(-1) / others)[keep].sum())
        rows += int(keep.sum())
    rows = max(rows, 1)
    return pd.DataFrame(
        {
            "layer": range(1, L + 1),
            f"within_{radius}": (near / rows).numpy(),
            f"beyond_{far}": (distant / rows).numpy(),
            f"uniform_within_{radius}": base_near / rows,
            f"uniform_beyond_{far}": base_far / rows,
        }
    )


def window_means(results: Sequence[HTAResult], near: int, far: int, skip_special: bool = True) -> pd.DataFrame:
    """Per hidden token: the mean contribution of ONE input token in the near window (distances 1 to
    ``near``) and in the far window (distances beyond ``far``), the quantities of C11's amended rule. A mean
    per token, not a window's sum: windows of unequal size compare as under uniform mixing, where every input
    token contributes 1/d_s to every hidden token and both means are 1/d_s.

    Beside them, C11's far share of the context (version 4): f = (sum of c_ij over |i - j| > ``far``) /
    (1 - c_ii), the part of what hidden token i takes from other tokens that comes from far ones, which a
    falling own share leaves unchanged when the context keeps its distance profile; and the own share c_ii.

    Hidden tokens with no input token beyond ``far`` (nothing to compare) are left out, as are the special
    tokens with ``skip_special`` (their context is studied apart).

    Returns rows (sentence, layer ≥ 1, position, n_tokens, near, far, own, far_share, n_far).
    """
    import pandas as pd

    frames = []
    for s, r in enumerate(results):
        c = r.c[1:]  # (L, n, n)
        L, n, _ = c.shape
        at = torch.arange(n)
        dist = (at.reshape(1, -1) - at.reshape(-1, 1)).abs()  # (n_i, n_j)
        m_near = ((dist > 0) & (dist <= near)).to(c.dtype)
        m_far = (dist > far).to(c.dtype)
        keep = _hidden_kept(r, skip_special) & (m_far.sum(-1) > 0)
        if not keep.any():
            continue
        near_mean = (c * m_near).sum(-1) / m_near.sum(-1).clamp_min(1)  # (L, n)
        far_mean = (c * m_far).sum(-1) / m_far.sum(-1).clamp_min(1)
        own = torch.diagonal(c, dim1=-2, dim2=-1)  # (L, n): c_ii
        # f = far sum / (1 - c_ii); a hidden token that keeps all of itself has no context, and no far share
        far_share = (c * m_far).sum(-1) / (1 - own).clamp_min(1e-300)
        pos = at[keep]
        frames.append(
            pd.DataFrame(
                {
                    "sentence": s,
                    "layer": torch.arange(1, L + 1).repeat_interleave(len(pos)).numpy(),
                    "position": pos.repeat(L).numpy(),
                    "n_tokens": n,
                    "near": near_mean[:, keep].flatten().numpy(),
                    "far": far_mean[:, keep].flatten().numpy(),
                    "own": own[:, keep].flatten().numpy(),
                    "far_share": far_share[:, keep].flatten().numpy(),
                    "n_far": m_far.sum(-1)[keep].repeat(L).numpy(),
                }
            )
        )
    columns = ["sentence", "layer", "position", "n_tokens", "near", "far", "own", "far_share", "n_far"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def window_summary(results: Sequence[HTAResult], near: int, far: int) -> pd.DataFrame:
    """Per layer: the near and far per-token means and the far share of the context f of
    :func:`window_means` averaged per sentence and over sentences, and uniform mixing's values averaged the
    same way: 1/d_s (``uniform``) and f = n_far / (d_s - 1) (``far_share_uniform``)."""
    import pandas as pd

    cols = ["near", "far", "uniform", "far_share", "far_share_uniform"]
    w = window_means(results, near, far)
    if w.empty:
        return pd.DataFrame(columns=["layer", *cols])
    w = w.assign(uniform=1 / w.n_tokens, far_share_uniform=w.n_far / (w.n_tokens - 1))
    return w.groupby(["layer", "sentence"])[cols].mean().groupby("layer").mean().reset_index()


def window_units(
    results: Sequence[HTAResult],
    near: int,
    far: int,
    by_tokens: bool = False,
    columns: Sequence[str] = ("near", "far"),
) -> tuple[pd.DataFrame, ...] | None:
    """(units, L) frames of ``columns`` of :func:`window_means` (by default the near and the far per-token
    means), per sentence (averaged over its hidden tokens) or, ``by_tokens``, per hidden token; columns are
    the layers 1..L. None where no hidden token has an input token beyond ``far``."""
    w = window_means(results, near, far)
    if w.empty:
        return None
    per = w.groupby([*(["sentence", "position"] if by_tokens else ["sentence"]), "layer"])[list(columns)].mean()
    return tuple(per[c].unstack("layer") for c in columns)


def per_sentence_layers(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """(sentences, L): the median of ``column`` of a :func:`token_table` over each sentence's hidden tokens,
    per layer."""
    return table.groupby(["sentence", "layer"])[column].median().unstack("layer")


def per_token_layers(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """(hidden tokens, L): ``column`` of a :func:`token_table` for each hidden token (sentence, position), per
    layer."""
    return table.pivot_table(index=["sentence", "position"], columns="layer", values=column)


def last_layer(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`token_table` at its last layer."""
    return table[table.layer == table.layer.max()]


def special_gaps(last: pd.DataFrame) -> tuple[list[float], list[float]]:
    """In the rows ``last`` of one layer of a :func:`token_table`: per sentence with special tokens and words,
    the special tokens' mean own share minus the median word token's; and the same per special token."""
    gaps, token_gaps = [], []
    for _, g in last.groupby("sentence"):
        words = g[~g.special]
        if g.special.any() and len(words):
            gaps.append(g[g.special].own.mean() - words.own.median())
            token_gaps += list(g[g.special].own - words.own.median())
    return gaps, token_gaps


def content_gaps(last: pd.DataFrame, content: Sequence[str], function: Sequence[str]) -> list[float]:
    """In the rows ``last`` of one layer of a :func:`token_table`: per sentence with both, the mean own share
    of its word tokens tagged ``content`` minus that of those tagged ``function``."""
    gaps = []
    for _, g in last.groupby("sentence"):
        words = g[~g.special]
        c, f = words[words.tag.isin(content)], words[words.tag.isin(function)]
        if len(c) and len(f):
            gaps.append(c.own.mean() - f.own.mean())
    return gaps


def special_profile(results: Sequence[HTAResult], max_offset: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where the first and the last special token of each sentence (e.g. [CLS] and [SEP]) get their
    context from (paper Figs 18, 25).

    Returns rows (target, layer, offset, c): the mean contribution of the input token ``offset``
    tokens away from the target, counted into the sentence (offset 0 = the target itself), and rows
    (target, layer, source, share) splitting the target's context into itself, the other special
    tokens and the words. Sentences without a special token at that end are skipped; an empty frame
    means the tokenizer adds none (as many causal models' tokenizers do).
    """
    import pandas as pd

    prof, src = [], []
    for r in results:
        n = r.n_tokens
        if not r.special:
            continue
        c = r.c[1:]
        spec = torch.tensor(r.special)
        for target, pos in (("first", 0), ("last", n - 1)):
            if not r.special[pos]:
                continue
            row = c[:, pos]  # (L, n): contributions to the target hidden token
            order = torch.arange(n) if pos == 0 else torch.arange(n - 1, -1, -1)
            for layer in range(row.shape[0]):
                for off in range(min(max_offset + 1, n)):
                    prof.append((target, layer + 1, off, float(row[layer, order[off]])))
                self_share = float(row[layer, pos])
                other_special = float(row[layer][spec].sum()) - self_share
                src.append((target, layer + 1, "itself", self_share))
                src.append((target, layer + 1, "other special tokens", other_special))
                src.append((target, layer + 1, "words", 1.0 - self_share - other_special))
    prof_df = pd.DataFrame(prof, columns=["target", "layer", "offset", "c"])
    src_df = pd.DataFrame(src, columns=["target", "layer", "source", "share"])
    if len(prof_df):
        prof_df = prof_df.groupby(["target", "layer", "offset"], as_index=False)["c"].mean()
        src_df = src_df.groupby(["target", "layer", "source"], as_index=False)["share"].mean()
    return prof_df, src_df


def pos_summary(table: pd.DataFrame, min_count: int = 20) -> pd.DataFrame:
    """Median own-token share per layer and POS tag (paper Figs 26–37); tags seen fewer than
    ``min_count`` times per layer are dropped."""
    g = table.groupby(["layer", "tag"])["own"]
    out = g.agg(["median", "count"]).reset_index()
    out["q1"] = g.quantile(0.25).values
    out["q3"] = g.quantile(0.75).values
    return out[out["count"] >= min_count].reset_index(drop=True)


def explorer_rows(results: Sequence[HTAResult], digits: int = 3) -> pd.DataFrame:
    """The data of the contribution explorer (:func:`identifiability.charts.context_mixing.contribution_explorer`).

    One row per (sentence s, layer l ≥ 1, hidden token i) carries that row of c, c[l, i, :], as a list w
    (flattened in the browser), which keeps the page small.

    Returns:
        a data frame with columns s, l, i, w; c rounded to ``digits``.
    """
    import pandas as pd

    L = results[0].S.shape[0] - 1
    recs = []
    for s, r in enumerate(results):
        c = r.c[1:].numpy().round(digits)  # (L, n, n)
        for layer in range(L):
            for i in range(r.n_tokens):
                recs.append({"s": s, "l": layer + 1, "i": i, "w": c[layer, i].tolist()})
    return pd.DataFrame(recs)
