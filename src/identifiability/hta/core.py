"""What every engine starts from: the model run once on a sentence, and the tangent directions of x.

x is the output of the model's x module (``trace.forward`` captures it; ``trace.from_x`` replays the
model from a given x) and the hidden states follow the book's convention: hidden[0] = x, hidden[l] the
output of layer l. A tangent direction is non-zero at one input position: exact mode uses all d_s·d
one-hot ones, estimate mode m random probes per position (:mod:`.estimator`). Each engine pushes them in
chunks of B directions and reduces every chunk to sums of squares at once, so memory never grows with
their number. ``chunk`` = B; by default B·n ≈ 8,192 tangent rows, which caps the working set at about
160 MB for a MiniLM-size model (d = 384) at any sentence length as long as the n² attention terms stay
small (n ≤ 64; at n = 128 about 0.35 GB). Everything runs on ``lm.device`` (a GPU too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, forward, tokenize
from .estimator import random_probes

DEFAULT_ROWS = 8192  # tangent rows (directions x positions) per chunk; see the module docstring


@dataclass
class Inputs:
    text: str
    tokens: list[str]
    enc: dict  # input_ids, attention_mask (and token_type_ids for a pair): (1, n) on the model's device
    x: torch.Tensor  # (n, d) the x module's output, the input of the first layer
    hidden: torch.Tensor  # (L+1, n, d) the model's hidden states (hidden[0] = the encoder's input)
    special: list[bool]


def prepare(lm: LoadedModel, item: str | SentenceTrace, max_tokens: int | None = None) -> Inputs:
    """Tokenise (or take a trace's ids), run the model once, keep x and the hidden states."""
    if isinstance(item, SentenceTrace):
        ids, text, segments = item.input_ids.reshape(1, -1), item.text, item.token_type_ids
    elif isinstance(item, str):
        enc = tokenize(lm, [item], max_tokens)
        ids, text, segments = enc["input_ids"], item, enc.get("token_type_ids")
    else:
        raise TypeError(f"expected a sentence (str) or a SentenceTrace, got {type(item).__name__}")
    enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if segments is not None:  # a sentence pair: the second segment's embedding is part of x
        enc["token_type_ids"] = segments.reshape(1, -1)
    f = forward(lm, enc)
    hidden = torch.stack([h[0] for h in f.out.hidden_states])
    special_ids = set(lm.tokenizer.all_special_ids)
    return Inputs(
        text,
        lm.tokenizer.convert_ids_to_tokens(ids[0].tolist()),
        f.enc,
        f.x[0],
        hidden,
        [int(i) in special_ids for i in ids[0].tolist()],
    )


@dataclass
class Directions:
    """N tangent directions of x, direction k non-zero only at position ``pos[k]`` with value ``vec[k]``.

    S[:, :, pos[k]] (squared block norms) accumulates ``weight · ||J v_k||²``; exact mode uses all n·e
    one-hot vectors (weight 1), estimate mode m random probes per position (weight 1/m).
    """

    n: int
    e: int
    probes: int | None = None  # None: exact
    probe: str = "orthonormal"
    seed: int = 0
    limit: int | None = None  # only the first ``limit`` directions (benchmarks time a sample of chunks)
    _vec: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.probes is not None:
            if self.probes < 1:
                raise ValueError(f"probes must be at least 1, got {self.probes}")
            self._vec = random_probes(self.n, self.e, self.probes, self.probe, self.seed)  # (n, m, e)

    @property
    def total(self) -> int:
        return self.n * (self.e if self.probes is None else self.probes)

    @property
    def count(self) -> int:
        return self.total if self.limit is None else min(self.limit, self.total)

    @property
    def weight(self) -> float:
        return 1.0 if self.probes is None else 1.0 / self.probes

    def chunk(self, start: int, stop: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(pos (B,), vec (B, e)) for directions start..stop-1 (position-major order)."""
        k = torch.arange(start, stop)
        if self.probes is None:
            pos, a = k // self.e, k % self.e
            vec = torch.zeros(stop - start, self.e, dtype=dtype)
            vec[torch.arange(stop - start), a] = 1.0
        else:
            pos = k // self.probes
            vec = self._vec.reshape(-1, self.e)[start:stop].to(dtype)
        return pos.to(device), vec.to(device)


def auto_chunk(n: int, chunk: int | None) -> int:
    """Directions per chunk B: ``chunk`` if given, else about DEFAULT_ROWS / n."""
    return max(1, int(chunk) if chunk else DEFAULT_ROWS // max(n, 1))
