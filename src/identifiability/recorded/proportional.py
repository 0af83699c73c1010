"""C10's sample (rule version 3): sentences drawn in proportion to their hidden tokens, and what one
sentence of it contributes.

Design. Every sentence of the corpus up to the 95th percentile of its length in tokens d_s (special tokens
included) is eligible (:func:`eligible`; the share of the corpus's hidden tokens they hold is reported).
Sentences are drawn with replacement, seeded, with probability p_s = d_s / sum of d_s over the eligible
ones (:func:`draw`). Per drawn sentence s, y_s is the share of its hidden tokens whose largest contributor
at the last layer (argmax over input tokens j of exact c^L_ij) is their own input token
(:func:`sentence_row`). The estimate is the mean of y_s over the n draws: E[y_s] = sum_s p_s y_s =
(sum_s d_s y_s) / (sum_s d_s), the share over the eligible sentences' hidden tokens, so it is unbiased
(tests/unit/test_proportional.py checks it against a length-uniform draw, which is not). Its interval is a
bootstrap over the draws (:func:`shares`); the baseline is 1/d_s
averaged the same way (mean over draws).

Words and special tokens apart: the mean over the draws that have word (special) tokens of the sentence's
share among its word (special) tokens. Each sentence is still weighted by all its hidden tokens, as drawn,
not by its word (special) tokens: an estimate of the share per sentence in this design, not a share over
the corpus's word (special) tokens (every sentence of a BERT tokenizer has two special tokens, so the
special share weights longer sentences more than the special tokens themselves would).

How many sentences (:func:`sentences_needed`): n = ceil(MARGIN · (1.96 · sd / h)²) for a half-width h of
0.03, with sd the per-sentence standard deviation of y_s from a pilot. The default pilot is version 2's
published interval, 0.519 to 0.596 over 20 sentences: sd ≈ 0.0385 · sqrt(20) / 1.96 = 0.088, which gives 32.9
sentences, doubled (MARGIN 2) for a pilot of 20 short sentences: 66. A finished run reports its measured
half-width, and the n the rule gives from its own sd when it exceeds 0.03 (the draws are a prefix-stable
sequence, so a larger n extends the same sample).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..base import paths
from ..base.stats import Interval, mean_interval
from ..models import keys
from . import store as recorded
from .store import Recorded

PERCENTILE = 95  # eligible: sentences up to this percentile of the corpus's lengths in tokens
HALF_WIDTH = 0.03  # the rule's largest half-width of the 95% interval
Z95 = 1.96
PILOT_SD = 0.0385 * math.sqrt(20) / Z95  # version 2's published interval 0.519-0.596 over 20 sentences
MARGIN = 2.0  # the pilot's sd comes from 20 short sentences, under another design
C10_JOB, C10_TARGET = "c10", "record-c10"  # the recorded run's folder under data/recorded, its make target


@dataclass(frozen=True)
class Eligible:
    """The eligible sentences of a corpus and what they cover.

    Attributes:
        indices: (m,) corpus indices of the eligible sentences, in corpus order.
        lengths: (m,) their hidden tokens d_s.
        max_tokens: the longest eligible length (the 95th percentile, rounded down to a whole token).
        covered: the share of the corpus's hidden tokens the eligible sentences hold.
        corpus_sentences, corpus_tokens: the whole corpus's sentences and hidden tokens.
    """

    indices: np.ndarray
    lengths: np.ndarray
    max_tokens: int
    covered: float
    corpus_sentences: int
    corpus_tokens: int

    @property
    def weights(self) -> np.ndarray:
        """(m,) the probability each eligible sentence is drawn with, d_s / sum of d_s."""
        return self.lengths / self.lengths.sum()


def eligible(lengths: Sequence[int], percentile: float = PERCENTILE) -> Eligible:
    """The sentences whose length in tokens (``lengths``, one per corpus sentence) is at most the
    ``percentile``-th percentile of them (numpy's linear interpolation)."""
    n = np.asarray(lengths, dtype=np.int64)
    if n.size == 0:
        raise ValueError("the corpus has no sentences")
    cut = int(math.floor(float(np.percentile(n, percentile))))
    keep = np.flatnonzero(n <= cut)
    return Eligible(keep, n[keep], cut, float(n[keep].sum() / n.sum()), int(n.size), int(n.sum()))


def draw(pool: Eligible, n: int, seed: int) -> list[int]:
    """``n`` corpus indices drawn with replacement, each with probability ``pool.weights``, seeded.

    Prefix-stable: the first k draws of ``draw(pool, n, seed)`` are ``draw(pool, k, seed)`` (one uniform
    number per draw, mapped through the cumulative weights), so a larger n extends the same sample."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    u = np.random.default_rng(seed).random(n)
    cdf = np.cumsum(pool.lengths) / pool.lengths.sum()
    picks = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)
    return [int(pool.indices[k]) for k in picks]


def shortest_drawn(pool: Eligible, lengths: Sequence[int], n: int, first: int, seed: int) -> list[int]:
    """The ``n`` shortest distinct sentences (corpus indices, ``lengths`` their tokens) among the first
    ``first`` draws of the sample (:func:`draw`), shortest first, ties in draw order: sentences of the sample
    cheap enough to compute live, which are no sample themselves."""
    drawn = list(dict.fromkeys(draw(pool, first, seed)))  # distinct, in draw order
    return sorted(drawn, key=lambda i: (lengths[i], drawn.index(i)))[:n]


def sentences_needed(sd: float = PILOT_SD, half_width: float = HALF_WIDTH, margin: float = MARGIN) -> int:
    """n = ceil(margin · (1.96 · sd / half_width)²): draws for a 95% half-width of ``half_width``."""
    return max(2, math.ceil(margin * (Z95 * sd / half_width) ** 2))


def sentence_row(result) -> dict:
    """One sentence's numbers at the last layer from its exact HTA (an ``HTAResult``; c is (L+1, d_s, d_s)):
    hidden tokens, word and special tokens, how many of each have their own input token as the largest
    contributor, those shares (None where the sentence has no such token) and 1/d_s."""
    import torch

    c = result.c[-1]  # (d_s, d_s): row i is hidden token i's contributions
    own = (c.argmax(-1) == torch.arange(c.shape[0])).numpy()  # (d_s,)
    special = np.asarray(result.special or [False] * c.shape[0], dtype=bool)
    d_s, n_special = int(c.shape[0]), int(special.sum())
    top, top_special = int(own.sum()), int(own[special].sum())

    def share(k: int, m: int) -> float | None:
        return k / m if m else None

    return {
        "tokens": d_s,
        "words": d_s - n_special,
        "special": n_special,
        "top_self": top,
        "top_self_words": top - top_special,
        "top_self_special": top_special,
        "share": top / d_s,
        "share_words": share(top - top_special, d_s - n_special),
        "share_special": share(top_special, n_special),
        "chance": 1 / d_s,
    }


def shares(rows: dict[int, dict], draws: Sequence[int], seed: int) -> dict:
    """C10's estimates from per-sentence numbers (``rows``: :func:`sentence_row`
    by corpus index; ``draws``: the drawn indices, repeats included): the mean over draws of each sentence's
    share (all hidden tokens; words and special tokens over the draws that have them), intervals over the
    draws, and 1/d_s averaged the same way."""
    got = [rows[i] for i in draws]

    def mean(key: str) -> Interval | None:
        return mean_interval([r[key] for r in got if r[key] is not None], seed, "drawn sentences")

    return {
        "all": mean("share"),
        "words": mean("share_words"),
        "special": mean("share_special"),
        "chance": float(np.mean([r["chance"] for r in got])),
        "word_chance": float(np.mean([r["chance"] for r in got if r["share_words"] is not None])),
    }


def record_command(model: str, corpus: str) -> str:
    """The command that computes C10's recorded run for ``model`` and ``corpus``."""
    if paths.is_default_model(model) and corpus == paths.DEFAULT_CORPUS:
        return f"make {C10_TARGET}"
    return f"make {C10_TARGET} MODEL={model} CORPUS={corpus}"


def recorded_c10(model: str | None | keys.ModelRef, corpus: str | keys.CorpusRef) -> Recorded | None:
    """C10's recorded run for ``model`` and ``corpus`` (names, or refs resolved already;
    ``data/recorded/c10/<model>/<corpus>``), or None."""
    return recorded.find(C10_JOB, keys.target(model, corpus).key, C10_TARGET)


def partial(rec: Recorded) -> str | None:
    """One line saying why chapter 6 cannot judge C10 on the recorded run ``rec`` (its draws, per-sentence
    numbers, seed or eligible pool missing or unreadable: "not run in this build" and the command), or None."""
    r = rec.results
    try:
        rows = {int(k): v for k, v in r["sentences"].items()}
        draws = [int(i) for i in r["draws"]]
        int(r["seed"]), float(r["eligible"]["covered"]), int(r["eligible"]["max_tokens"])
        missing = [i for i in draws if not isinstance(rows.get(i, {}).get("share"), int | float)]
        bad = "no draws" if not draws else f"{len(missing)} draws without their numbers" if missing else ""
    except (KeyError, TypeError, ValueError, AttributeError):
        bad = "its draws or per-sentence numbers are missing or unreadable"
    if not bad:
        return None
    return recorded.partial_line(rec, bad, C10_TARGET)  # its own target names MODEL=, CORPUS= if not defaults


def describe(sample: dict) -> str:
    """What a recorded sample is, for C10's reason (``sample``: ``TopContributor.c10_sample``)."""
    return (
        f"exact HTA of {sample['sentences']} sentences drawn in proportion to their tokens ({sample['distinct']} "
        f"distinct, {sample['hidden_tokens']:,} hidden tokens) from the sentences of up to "
        f"{sample['max_tokens']} tokens, which hold {sample['covered']:.1%} of the corpus's hidden tokens; "
        f"half-width {sample['half_width']:.3f}"
    )
