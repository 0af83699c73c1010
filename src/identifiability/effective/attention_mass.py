"""Attention mass per key category (chapter 3, Figure 1 (b, c) and claim C5): how much of each query's
attention lands on the start token, the separators, punctuation and the other tokens, in raw attention, in
effective attention and in the random-subspace null model.

Masses are summed over the query rows, with no row normalisation: a ratio of summed masses measures the mass
that exists (C5's rule in force). C5's original measure, each row's share of its own sum, is kept beside it
(:func:`row_normalised_mass`). The separators are also named by place (:func:`separator_positions`): the one
that ends the input, and on a sentence pair the one(s) between its segments.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from ..corpus.token_roles import CATEGORIES, SEPARATOR, STRUCTURAL, token_categories
from ..models.loaded_model import LoadedModel
from . import nulls
from .projection import iter_effective

END_SEPARATOR, MIDDLE_SEPARATOR = "end separator", "middle separator"


def separator_positions(categories: Sequence[str]) -> list[str]:
    """``categories`` with each separator named by its place: the last one ends the input
    (:data:`END_SEPARATOR`), any before it sit between the segments of a pair (:data:`MIDDLE_SEPARATOR`:
    one [SEP] for BERT, two </s> for RoBERTa)."""
    seps = [k for k, c in enumerate(categories) if c == SEPARATOR]
    out = list(categories)
    for k in seps:
        out[k] = END_SEPARATOR if k == seps[-1] else MIDDLE_SEPARATOR
    return out


def key_onehot(categories: Sequence[str | None], order: Sequence[str]) -> torch.Tensor:
    """(d_s, C) float64: 1 where key k belongs to ``order[c]`` (a category not in ``order`` belongs to none)."""
    idx = torch.tensor([order.index(c) if c in order else len(order) for c in categories])
    return torch.nn.functional.one_hot(idx, len(order) + 1)[:, :-1].double()


def row_normalised_mass(total: torch.Tensor, on: torch.Tensor) -> float:
    """C5's original measure: each row's mass on a category (``on``) as a share of the row's sum (``total``),
    averaged over the rows whose sum exceeds 1e-3 in absolute value (the rest divide by almost nothing)."""
    ok = total.abs() > 1e-3
    return float((on[ok] / total[ok]).mean())


def mass_rows(
    text: int, categories: Sequence[str], raw: torch.Tensor, effective: torch.Tensor, random: torch.Tensor
) -> pd.DataFrame:
    """One input's attention mass per key category (separators also by place), layer and head, summed over
    the query rows, in raw attention, effective attention and the random-subspace projection: each (L, H, d_s),
    every key's weight summed over the queries.

    Returns rows ``text, d_s, category, keys`` (its tokens), ``layer`` (1..L), ``head``, ``raw``,
    ``effective``, ``random``.
    """
    places = [c if c in (END_SEPARATOR, MIDDLE_SEPARATOR) else None for c in separator_positions(categories)]
    order = [c for c in (*CATEGORIES, END_SEPARATOR, MIDDLE_SEPARATOR) if c in categories or c in places]
    count = {c: list(categories).count(c) + places.count(c) for c in order}
    onehot = key_onehot(categories, order) + key_onehot(places, order)  # a separator: SEPARATOR and its place
    sums = {name: m.double() @ onehot for name, m in (("raw", raw), ("effective", effective), ("random", random))}
    L, H, C = sums["raw"].shape
    li, hi, ci = torch.meshgrid(torch.arange(L), torch.arange(H), torch.arange(C), indexing="ij")
    return pd.DataFrame(
        {
            "text": text,
            "d_s": raw.shape[-1],
            "category": [order[c] for c in ci.flatten().tolist()],
            "keys": [count[order[c]] for c in ci.flatten().tolist()],
            "layer": li.flatten().numpy() + 1,
            "head": hi.flatten().numpy(),
            **{k: v.flatten().numpy() for k, v in sums.items()},
        }
    )


def mass_tables(
    lm: LoadedModel,
    texts: Sequence[str],
    dtype: torch.dtype = torch.float32,
    rtol: float | None = None,
    progress: bool = True,
    value_bias: bool = True,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Attention mass per key category in one pass: :func:`mass_rows` of every text, and C5's original
    measure per text for the structural roles (rows ``text, category, raw`` (mean mass per row),
    ``effective``, ``random`` (:func:`row_normalised_mass`)). The random subspace (seeded per text) enters
    through ``A Q`` alone: its column sums are (1ᵀ A Q) Qᵀ and its row sums A Q (Qᵀ 1)."""
    rows, normalised = [], []
    for i, tr, eff in iter_effective(
        lm, texts, dtype=dtype, rtol=rtol, progress=progress, desc="attention mass", value_bias=value_bias
    ):
        cats = token_categories(lm.tokenizer, tr.input_ids)
        a, e = tr.attentions.double(), eff.effective.double()
        q = nulls.random_basis(a, eff.rank, seed=seed * 100_003 + i)
        aq = a @ q  # (L, H, d_s, r)
        rows.append(mass_rows(i, cats, a.sum(-2), e.sum(-2), (a.sum(-2).unsqueeze(-2) @ q @ q.mT).squeeze(-2)))
        for c in STRUCTURAL:
            keys = torch.tensor([k == c for k in cats])
            if keys.any():
                rnd_total, rnd_on = aq @ q.sum(-2).unsqueeze(-1), aq @ q[..., keys, :].sum(-2).unsqueeze(-1)
                normalised.append({
                    "text": i,
                    "category": c,
                    "raw": float(a[..., keys].sum(-1).mean()),
                    "effective": row_normalised_mass(e.sum(-1), e[..., keys].sum(-1)),
                    "random": row_normalised_mass(rnd_total, rnd_on),
                })  # fmt: skip
    return (
        pd.concat(rows, ignore_index=True),
        pd.DataFrame(normalised, columns=["text", "category", "raw", "effective", "random"]),
    )
