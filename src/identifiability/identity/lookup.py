"""Nearest-neighbour lookup and the chance levels it is compared with.

Token i is *identified* at layer l if the nearest neighbour of g^l(e_i^l) among a set of candidate input
embeddings is x_i, with L2 or cosine lookup. Candidates are the input embeddings of the same sentence (the
paper's setting) or, stricter, of every token in the evaluation split (a candidate is right when it has the
same input embedding: the same vocabulary id at the same position).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

LOOKUPS = ("l2", "cos")


def _scores(q: torch.Tensor, c: torch.Tensor, lookup: str) -> torch.Tensor:
    """Larger is nearer. q: (..., n, d), c: (..., m, d) -> (..., n, m).

    L2: -|q-c|^2 + |q|^2 = 2 q.c - |c|^2 (|q|^2 is the same for every candidate);
    cosine: q.c / |c| (dividing by |q| does not change the ranking).
    """
    dots = q @ c.transpose(-1, -2)
    if lookup == "l2":
        return 2 * dots - c.pow(2).sum(-1).unsqueeze(-2)
    if lookup == "cos":
        return dots / c.norm(dim=-1).clamp_min(1e-12).unsqueeze(-2)
    raise ValueError(f"lookup must be one of {LOOKUPS}, got {lookup!r}")


class SentenceLayout:
    """Tokens grouped by sentence into a padded (n_sent, n_max) grid, for same-sentence lookups."""

    def __init__(self, sentence: torch.Tensor, position: torch.Tensor):
        uniq, slot = torch.unique(sentence, return_inverse=True)
        self.n_sent = uniq.numel()
        order = torch.argsort(slot * (int(position.max()) + 1) + position)  # by sentence, then position
        counts = torch.bincount(slot, minlength=self.n_sent)
        starts = torch.cumsum(counts, 0) - counts
        col = torch.empty_like(slot)
        col[order] = torch.arange(slot.numel()) - starts[slot[order]]
        self.slot, self.col, self.counts = slot, col, counts
        self.n_max = int(counts.max())
        self.valid = torch.arange(self.n_max)[None, :] < counts[:, None]  # (n_sent, n_max)
        self.pos = torch.full((self.n_sent, self.n_max), -1, dtype=torch.long)
        self.pos[slot, col] = position
        self.row = torch.full((self.n_sent, self.n_max), -1, dtype=torch.long)
        self.row[slot, col] = torch.arange(slot.numel())

    def pad(self, v: torch.Tensor) -> torch.Tensor:
        """(n, d) -> (n_sent, n_max, d), zeros where there is no token."""
        out = v.new_zeros(self.n_sent, self.n_max, v.shape[-1])
        out[self.slot, self.col] = v
        return out


@torch.no_grad()
def nearest_in_sentence(
    queries: torch.Tensor, candidates: torch.Tensor, layout: SentenceLayout, lookup: str
) -> torch.Tensor:
    """Row of the nearest same-sentence candidate for every query.

    queries: (n, d) g(e_i); candidates: (n, d) the x_j of the same n tokens (row j is token j);
    returns (n,) the row j of the winner (its position is ``position[j]``).
    """
    s = _scores(layout.pad(queries), layout.pad(candidates), lookup)  # (n_sent, n_max, n_max)
    s = s.masked_fill(~layout.valid[:, None, :], float("-inf"))
    best = s.argmax(-1)  # (n_sent, n_max) column of the winner
    return layout.row.gather(1, best)[layout.slot, layout.col]


@torch.no_grad()
def nearest_in_set(
    queries: torch.Tensor, candidates: torch.Tensor, keys: torch.Tensor, lookup: str, chunk: int = 2048
) -> torch.Tensor:
    """Row of the nearest candidate among *all* tokens of the set (duplicates of a key are one candidate,
    since equal keys mean equal input embeddings; the first row holding it is returned).
    queries, candidates: (n, d); keys: (n,); returns (n,) rows."""
    uniq, inv = torch.unique(keys, return_inverse=True)
    first = torch.full((uniq.numel(),), keys.numel(), dtype=torch.long).scatter_reduce(
        0, inv, torch.arange(keys.numel()), reduce="amin"
    )
    c = candidates[first]
    out = torch.empty(queries.shape[0], dtype=torch.long)
    for s in range(0, queries.shape[0], chunk):
        out[s : s + chunk] = first[_scores(queries[s : s + chunk], c, lookup).argmax(-1)]
    return out


def chance_in_sentence(layout: SentenceLayout) -> float:
    """Expected identification rate of a uniformly random same-sentence guess: mean over tokens of 1/d_s."""
    return float((1.0 / layout.counts.double())[layout.slot].mean())


def chance_in_set(keys: torch.Tensor) -> float:
    """Expected rate of a uniformly random pick among all tokens of the set (a pick is right when it has
    the same input embedding): mean over tokens of (tokens sharing its key) / n."""
    _, inv, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    return float((counts[inv].double() / keys.numel()).mean())


def offset_chance(
    layout: SentenceLayout, position: torch.Tensor, offsets: Sequence[int], among_others: bool = False
) -> dict[int, float]:
    """For each offset k: the chance that a uniformly random same-sentence guess is x_{i+k}
    (mean over tokens of [token i+k is a candidate] / d_s). With ``among_others`` the guess is uniform over
    the *other* candidates (d_s - 1 of them): what a miss would give if misses were spread evenly."""
    M = int(position.max()) + max([abs(k) for k in offsets] + [0]) + 1
    code = layout.slot * M + position
    n_valid = layout.counts[layout.slot].double()
    if among_others:
        n_valid = (n_valid - 1).clamp_min(1)
    out = {}
    for k in offsets:
        present = torch.isin(code + k, code) & (position + k >= 0)
        out[k] = float((present.double() / n_valid).mean())
    return out
