"""Splits by sentence, and the three input variants a probe can see.

A split never divides a sentence's tokens: train, val and test hold disjoint sentences. The variants separate
angle from magnitude: ``raw`` (e_i^l -> x_i), ``unit`` (e_i^l/|e_i^l| -> x_i/|x_i|) and ``norm``
(|e_i^l| -> x_i).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .hidden import HiddenStates

VARIANTS = ("raw", "unit", "norm", "unit+norm")


def split_by_sentence(
    n_sentences: int, seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
) -> dict[str, torch.Tensor]:
    """Disjoint sentence indices for "train", "val" and "test" (never split a sentence's tokens)."""
    if n_sentences < 3:
        raise ValueError(f"need at least 3 sentences to split into train/val/test, got {n_sentences}")
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n_sentences, generator=g)
    n_val = max(1, round(fractions[1] * n_sentences))
    n_test = max(1, round(fractions[2] * n_sentences))
    n_train = n_sentences - n_val - n_test
    if n_train < 1:
        raise ValueError(f"{n_sentences} sentences leave none for training; use more sentences")
    return {
        "train": perm[:n_train].sort().values,
        "val": perm[n_train : n_train + n_val].sort().values,
        "test": perm[n_train + n_val :].sort().values,
    }


@dataclass
class SplitData:
    """The tokens of one split, as a probe sees them.

    Attributes:
        inputs: (L+1, n, d_in) probe inputs per layer (e_i^l, or e_i^l/|e_i^l|, or |e_i^l| with d_in = 1).
        targets: (n, d) what the probe is trained towards, and the lookup candidates (x_i or x_i/|x_i|).
        sentence, position, key: (n,) sentence index, position, and a key equal for two tokens exactly when
            their input embeddings are equal (same vocabulary id at the same position).
        token_id: (n,) vocabulary ids.
        raw: (L+1, n, d) the untransformed e_i^l (for the naive map and for norms/angles).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    sentence: torch.Tensor
    position: torch.Tensor
    key: torch.Tensor
    raw: torch.Tensor
    token_id: torch.Tensor
    variant: str = "raw"

    @property
    def n(self) -> int:
        return self.targets.shape[0]


def unit_vectors(v: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d) scaled to length 1 (a zero vector stays zero)."""
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def token_mask(hs: HiddenStates, sentences: torch.Tensor, include_special: bool = False) -> torch.Tensor:
    """(N,) bool: tokens of ``sentences``, special tokens dropped unless ``include_special``."""
    m = torch.isin(hs.sentence, sentences)
    return m if include_special else m & ~hs.special


def make_split(
    hs: HiddenStates, sentences: torch.Tensor, variant: str = "raw", include_special: bool = False
) -> SplitData:
    """Gather one split's tokens and transform them for ``variant``:

    * ``raw``: inputs e_i^l, targets x_i;
    * ``unit``: inputs e_i^l/|e_i^l|, targets x_i/|x_i| (direction only: magnitude removed everywhere);
    * ``norm``: inputs |e_i^l| (a single number), targets x_i (magnitude only);
    * ``unit+norm``: inputs (e_i^l/|e_i^l|, |e_i^l|), targets x_i/|x_i| (what the norm adds to the direction).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    m = token_mask(hs, sentences, include_special)
    if not bool(m.any()):
        raise ValueError("a split holds no tokens; use more sentences or include_special=True")
    raw = hs.hidden[:, m]
    x = hs.x[m]
    if variant == "raw":
        inputs, targets = raw, x
    elif variant == "unit":
        inputs, targets = unit_vectors(raw), unit_vectors(x)
    elif variant == "unit+norm":
        inputs, targets = torch.cat([unit_vectors(raw), raw.norm(dim=-1, keepdim=True)], -1), unit_vectors(x)
    else:
        inputs, targets = raw.norm(dim=-1, keepdim=True), x
    key = hs.token_id[m] * (int(hs.position.max()) + 1) + hs.position[m]
    return SplitData(
        inputs=inputs,
        targets=targets,
        sentence=hs.sentence[m],
        position=hs.position[m],
        key=key,
        raw=raw,
        token_id=hs.token_id[m],
        variant=variant,
    )


def make_splits(
    hs: HiddenStates, seed: int = 0, variant: str = "raw", include_special: bool = False
) -> dict[str, SplitData]:
    """train / val / test :class:`SplitData` of ``hs``, split by sentence with ``seed``."""
    idx = split_by_sentence(hs.n_sentences, seed)
    return {k: make_split(hs, v, variant, include_special) for k, v in idx.items()}
