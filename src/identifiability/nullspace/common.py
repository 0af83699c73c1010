"""Helpers shared by the non-identifiability modules: target lengths, exact-length texts, float64 runs,
masks and distances, and the tolerances of the constructions.

Shapes: d_s tokens, d model width, d_v = d / H value width, d_q query/key width, L layers, H heads.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

OUTPUT_TOL = 1e-10  # constructed alternatives must reproduce the head output to this relative error
SEARCH_TOL = 1e-6  # realisable alternatives found by optimisation: accepted up to this relative output error
SHRINK = 1e-12  # the "largest step" is shrunk by this relative amount so rounding cannot produce a negative entry


def parse_lengths(spec: str | Sequence[int], d_v: int, max_len: int | None = None) -> list[int]:
    """Target sequence lengths from a spec such as ``"8,16,dv,dv+1,dv+2,2dv,256"``.

    Items are integers or expressions in ``dv`` (the head dimension): ``dv``, ``dv+2``, ``dv-8``, ``3dv``.
    Lengths are clipped to ``[2, max_len]``, deduplicated and sorted, so the same spec works for any model.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = set()
    for item in items:
        s = str(item).strip().replace(" ", "").lower()
        if not s:
            continue
        m = re.fullmatch(r"(\d*)dv([+-]\d+)?", s)
        if m:
            n = (int(m.group(1)) if m.group(1) else 1) * d_v + (int(m.group(2)) if m.group(2) else 0)
        elif re.fullmatch(r"\d+", s):
            n = int(s)
        else:
            raise ValueError(f"length {item!r} is neither an integer nor of the form [k]dv[+-n] (e.g. 2dv, dv+2)")
        n = max(2, n)
        if max_len is not None:
            n = min(n, max_len)
        out.add(n)
    return sorted(out)


def text_of_length(corpus, n_tokens: int, tokenizer, seed: int = 0, tries: int = 200) -> str:
    """Consecutive corpus sentences cut to *exactly* ``n_tokens`` tokens (special tokens included).

    :func:`identifiability.corpus.corpora.concatenated_inputs` may land a token or two short of its target (a word can
    be several tokens); the threshold example needs the exact length, so start positions are retried.
    """
    from ..corpus.corpora import concatenated_inputs

    rng = random.Random(seed)
    for _ in range(tries):
        text = concatenated_inputs(corpus, [n_tokens], tokenizer, seed=rng.randrange(1 << 30))[0]
        if len(tokenizer(text)["input_ids"]) == n_tokens:
            return text
    raise ValueError(f"no text of exactly {n_tokens} tokens found in {tries} tries; use another corpus or seed")


def texts_of_lengths(corpus, lengths: Sequence[int], tokenizer, seed: int = 0) -> list[str]:
    """One text of *exactly* each of ``lengths`` tokens (special tokens included), consecutive corpus sentences
    joined: :func:`identifiability.corpus.corpora.concatenated_inputs`' text where it lands on its length, else
    :func:`text_of_length`'s (other starts, and its one-line error where the corpus gives none).

    ``concatenated_inputs`` trims whole words, so where the word at the cut is several tokens it lands short
    (on lee_test, with MiniLM's tokenizer, its text for d_v + 1 = 33 had 32 tokens): a survey that must hold
    d_v + 1 and d_v + 2 (C1's rule) cannot take its lengths on trust.
    """
    from ..corpus.corpora import concatenated_inputs

    texts = concatenated_inputs(corpus, list(lengths), tokenizer, seed=seed)
    return [
        t if len(tokenizer(t, verbose=False)["input_ids"]) == n else text_of_length(corpus, n, tokenizer, seed=seed)
        for n, t in zip(lengths, texts)
    ]


@contextmanager
def float64(lm) -> Iterator:
    """Run ``lm`` in float64 inside the block (attention A, values V and logits exact to ~1e-16), then restore.

    Ranks and the realisability test need float64 *inputs*: a float32 A has relative noise ~1e-7, which makes
    every matrix full rank at any tolerance that can also see the real structure.
    """
    dtype = next(lm.model.parameters()).dtype
    lm.model.double()
    try:
        yield lm
    finally:
        lm.model.to(dtype)  # float32 -> float64 -> float32 is exact


def visible_mask(n: int, causal: bool) -> torch.Tensor:
    """(d_s, d_s) bool: which keys each query can see (lower triangle for a causal model, all otherwise)."""
    ones = torch.ones(n, n, dtype=torch.bool)
    return torch.tril(ones) if causal else ones


def tv_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Total-variation distance between corresponding rows, (d_s,) = 0.5 * ||a_i - b_i||_1."""
    return 0.5 * (a - b).abs().sum(-1)


def rel_output_error(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> float:
    """||(B - A) T||_F / ||A T||_F: how much the head output changes when A is replaced by B."""
    return float(((b - a) @ t).norm() / (a @ t).norm())
