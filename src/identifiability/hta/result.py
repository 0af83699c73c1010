"""The result of Hidden Token Attribution: squared block norms S and the contributions c derived from them.

Notation: S[l, i, j] = ||∂e_i^l / ∂x_j||_F² is the *squared* Frobenius norm of a Jacobian block (never a
sequence length, which is n or d_s here); c = √S / Σ_j √S is the paper's normalised contribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def contributions(S: torch.Tensor) -> torch.Tensor:
    """Normalised contributions c = √S / Σ_j √S.

    Args:
        S: (..., d_s, d_s) squared block norms S[..., i, j] = ||∂e_i/∂x_j||_F².
    Returns:
        c with the same shape: non-negative, each row (fixed i) sums to 1.
    """
    norms = S.clamp_min(0).sqrt()
    total = norms.sum(-1, keepdim=True)
    return norms / total.clamp_min(torch.finfo(norms.dtype).tiny)


@dataclass
class HTAResult:
    """Hidden Token Attribution of one sentence.

    Attributes:
        text: the sentence.
        tokens: its d_s tokens (special tokens included).
        S: (L+1, d_s, d_s) float64 squared block norms ||∂e_i^l/∂x_j||_F² (an unbiased estimate of them in
            estimate mode); layer 0 is the input itself (S[0] is diagonal), layers 1..L the layers' outputs.
        method: "naive", "generic" or "folded" (the engine that produced S).
        mode: "exact" or "estimate".
        probes: probes per input token in estimate mode, else None.
        seconds: wall time of the computation.
        special: d_s flags, True for the tokenizer's special tokens ([CLS], [SEP], <s>, ...).
    """

    text: str
    tokens: list[str]
    S: torch.Tensor
    method: str
    mode: str = "exact"
    probes: int | None = None
    seconds: float = 0.0
    special: list[bool] = field(default_factory=list)

    @property
    def c(self) -> torch.Tensor:
        """(L+1, d_s, d_s) normalised contributions: c[l, i, j] is input token j's share in hidden token i."""
        return contributions(self.S)

    @property
    def norms(self) -> torch.Tensor:
        """(L+1, d_s, d_s) raw block norms ĉ = √S (S holds the squared norms)."""
        return self.S.clamp_min(0).sqrt()

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)
