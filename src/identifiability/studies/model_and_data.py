"""Chapter 1's studies: how long the corpus's sentences are, and one sentence's attention."""

from __future__ import annotations

from dataclasses import dataclass

from ..corpus.corpora import token_lengths
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, trace_batch
from . import Study, data


@dataclass(frozen=True)
class CorpusLengths(Study):
    """Sentence lengths of a seeded sample, in tokens (special tokens included) and words."""

    corpus_sentences: int
    sampled: int
    mean_tokens: float
    median_tokens: float
    max_tokens_seen: int
    share_longer_than_d_head: float  # share of sampled sentences with d_s > d_v
    tokens: list[int] = data()  # (n,) d_s per sampled sentence
    words: list[int] = data()  # (n,) whitespace words per sampled sentence
    d_v: int = data()


def corpus_lengths(lm: LoadedModel, sample: list[str], corpus_sentences: int) -> CorpusLengths:
    """Lengths of the sampled sentences against the head dimension d_v, where non-identifiability can start."""
    if not sample:
        raise ValueError("no sentences to measure: the sample is empty")
    tokens = token_lengths(sample, lm.tokenizer)
    words = [len(s.split()) for s in sample]
    ordered = sorted(tokens)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return CorpusLengths(
        corpus_sentences=corpus_sentences,
        sampled=len(sample),
        mean_tokens=sum(tokens) / len(tokens),
        median_tokens=float(median),
        max_tokens_seen=max(tokens),
        share_longer_than_d_head=sum(t > lm.d_v for t in tokens) / len(tokens),
        tokens=tokens,
        words=words,
        d_v=lm.d_v,
    )


@dataclass(frozen=True)
class ExampleSentence(Study):
    """One sentence traced through the model: its tokens and every head's attention A."""

    example: str
    example_tokens: list[str]
    example_row_sums_max_error: float  # max |sum_j A_ij - 1| over layers, heads and rows
    trace: SentenceTrace = data()


def example_sentence(lm: LoadedModel, text: str, max_tokens: int | None = None) -> ExampleSentence:
    tr = trace_batch(lm, [text], max_tokens=max_tokens)[0]
    return ExampleSentence(
        example=text,
        example_tokens=tr.tokens,
        example_row_sums_max_error=float((tr.attentions.sum(-1) - 1).abs().max()),
        trace=tr,
    )


RESULTS = (CorpusLengths, ExampleSentence)
