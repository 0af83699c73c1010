"""Chapter 6's studies: Hidden Token Attribution (paper section 5), one function per section.

:func:`exact_hta` computes exact HTA of short sentences and the estimator on the same ones;
:func:`estimator_error` measures the estimator against it; :func:`corpus_hta` runs HTA over the sampled
corpora, and the section studies read their results: :func:`own_share` (C9), :func:`top_contributor`
(C10), :func:`context_locality` (C11), :func:`segment_crossing`, :func:`special_tokens` and
:func:`parts_of_speech` (C12). Sentences are the units every interval resamples: the tokens of one
sentence are not independent. Layers are numbered 1..L (layer 0, x itself, is left out of every
statistic).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..hta import (
    HTAResult,
    available_method,
    cross_segment,
    distance_profile,
    estimate_error,
    hta_corpus,
    layer_summary,
    locality,
    pos_summary,
    special_profile,
    token_table,
)
from ..loaded_model import LoadedModel
from ..pos import word_piece_tags
from ..stats import grouped_ci, paired_ci
from ..verdicts import CONTENT_TAGS, FUNCTION_TAGS, Interval
from . import Study, data

RADIUS, FAR = 3, 8  # "near" is within ±3 tokens, "far" beyond ±8 (the C11 rule's distances)
TARGET_ERROR = 0.01  # the median relative error the chapter asks the probes for


@dataclass(frozen=True)
class ExactHTA(Study):
    """Exact HTA of short sentences, and the estimator on the same sentences: the engine and its cost."""

    method: str  # the engine hta picks for the model: "folded" or "generic"
    causal: bool
    exact_sentences: int
    exact_tokens_mean: float
    exact_seconds_per_sentence: float
    estimate_seconds_per_sentence: float
    estimator_probes: int
    exact: list[HTAResult] = data()  # per sentence; .c is (L+1, d_s, d_s)
    estimated: list[HTAResult] = data()  # the same sentences, estimate mode
    family: str = data()  # the architecture family (why the engine is what it is)


def exact_hta(lm: LoadedModel, texts: list[str], probes: int, seed: int, cache: bool) -> ExactHTA:
    """Exact HTA of ``texts`` and the estimator with ``probes`` random directions per token on them (probe
    seed ``seed + k`` for sentence k), read from or written to the HTA cache when ``cache``."""
    exact = hta_corpus(lm, texts, mode="exact", cache=cache, desc="exact HTA")
    estimated = hta_corpus(lm, texts, mode="estimate", probes=probes, seed=seed, cache=cache, desc="estimated HTA")
    return ExactHTA(
        method=available_method(lm),
        causal=lm.adapter.causal,
        exact_sentences=len(exact),
        exact_tokens_mean=float(np.mean([r.n_tokens for r in exact])),
        exact_seconds_per_sentence=float(np.mean([r.seconds for r in exact])),
        estimate_seconds_per_sentence=float(np.mean([r.seconds for r in estimated])),
        estimator_probes=probes,
        exact=exact,
        estimated=estimated,
        family=lm.adapter.family,
    )


def _length_band(results: list[HTAResult]) -> str:
    n = [r.n_tokens for r in results]
    return f"{min(n)}-{max(n)} tokens"


@dataclass(frozen=True)
class EstimatorError(Study):
    """How far the estimator is from exact HTA, by sentence length, and what that does to the statistics."""

    estimator_error: dict  # identifiability.hta.estimate_error on the exact sentences
    estimator_error_by_length: dict  # {length band: median, p95, top_agreement}
    estimator_effect_on_own_median: float  # largest per-layer change of the median own share
    estimator_effect_on_top_is_self_pct: float  # largest per-layer change of % top-is-self, in points
    estimator_probes_for_1pct: int  # probes per token a median error of 1% would take (1/sqrt(probes) law)
    by_length: dict[str, dict] = data()  # {length band: the whole estimate_error dict}
    probes: int = data()
    d_model: int = data()  # directions per token of exact HTA


def estimator_error(
    lm: LoadedModel, exact: ExactHTA, long_texts: list[str], probes: int, seed: int, cache: bool
) -> EstimatorError:
    """The estimator's error on ``exact``'s sentences and on the longer ``long_texts`` (exact HTA of those
    too), its effect on the per-layer statistics, and the probes a 1% median error would need."""
    err = estimate_error(exact.exact, exact.estimated)
    by_length = {_length_band(exact.exact): err}
    if long_texts:
        ex = hta_corpus(lm, long_texts, mode="exact", cache=cache, desc="exact HTA, longer")
        es = hta_corpus(
            lm, long_texts, mode="estimate", probes=probes, seed=seed, cache=cache, desc="estimated HTA, longer"
        )
        by_length[_length_band(ex)] = estimate_error(ex, es)
    summ_ex = layer_summary(token_table(exact.exact)).set_index("layer")
    summ_es = layer_summary(token_table(exact.estimated)).set_index("layer")
    return EstimatorError(
        estimator_error=err,
        estimator_error_by_length={
            k: {m: v[m] for m in ("median", "p95", "top_agreement")} for k, v in by_length.items()
        },
        estimator_effect_on_own_median=float((summ_es.own_median - summ_ex.own_median).abs().max()),
        estimator_effect_on_top_is_self_pct=float((summ_es.top_is_self_pct - summ_ex.top_is_self_pct).abs().max()),
        estimator_probes_for_1pct=int(math.ceil(probes * (err["median"] / TARGET_ERROR) ** 2)),
        by_length=by_length,
        probes=probes,
        d_model=lm.d_model,
    )


@dataclass(frozen=True)
class CorpusHTA(Study):
    """HTA of every sampled sentence of one or more corpora, and its per-layer summary (paper Fig 3)."""

    corpus_mode: str  # "exact" or "estimate"
    corpus_sentences: dict  # {corpus: sentences}
    corpus_tokens: dict  # {corpus: tokens}
    corpus_seconds: float
    layer_summary: dict  # {corpus: identifiability.hta.layer_summary columns, rounded to 5 digits}
    main: str = data()  # the chapter's own corpus (the first one given)
    results: dict[str, list[HTAResult]] = data()  # {corpus: per sentence}
    tables: dict[str, pd.DataFrame] = data()  # {corpus: identifiability.hta.token_table with POS tags}
    summaries: dict[str, pd.DataFrame] = data()  # {corpus: identifiability.hta.layer_summary}


def corpus_hta(
    lm: LoadedModel,
    corpora: dict[str, list[str]],
    mode: str,
    probes: int,
    seed: int,
    max_tokens: int,
    cache: bool,
) -> CorpusHTA:
    """HTA (``mode`` "exact" or "estimate") of every sentence of ``corpora`` ({name: sentences}; the first
    is the chapter's own), each hidden token with its word's part of speech."""
    t0 = time.perf_counter()
    results = {
        name: hta_corpus(lm, texts, mode=mode, probes=probes, seed=seed, cache=cache, desc=f"{mode} HTA, {name}")
        for name, texts in corpora.items()
    }
    tables = {
        name: token_table(res, word_piece_tags(lm.tokenizer, [r.text for r in res], max_tokens))
        for name, res in results.items()
    }
    summaries = {name: layer_summary(t) for name, t in tables.items()}
    return CorpusHTA(
        corpus_mode=mode,
        corpus_sentences={k: len(v) for k, v in results.items()},
        corpus_tokens={k: int(sum(r.n_tokens for r in v)) for k, v in results.items()},
        corpus_seconds=time.perf_counter() - t0,
        layer_summary={k: v.round(5).to_dict(orient="list") for k, v in summaries.items()},
        main=next(iter(corpora)),
        results=results,
        tables=tables,
        summaries=summaries,
    )


def _per_sentence_layers(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """(sentences, L): the median of ``column`` over each sentence's hidden tokens, per layer."""
    return table.groupby(["sentence", "layer"])[column].median().unstack("layer")


@dataclass(frozen=True)
class OwnShare(Study):
    """Section 1 (paper Fig 3a, claim C9): the input token's own share in its hidden token, per layer."""

    own_median_first: float  # median own share at layer 1, the chapter's corpus
    own_median_last: float  # ... at layer L
    own_monotone: dict  # {corpus: the median falls at every layer step}
    top_median_last: float  # median share of the top contributor at layer L
    medians: list[float] = data()  # (L,) median own share per layer, the chapter's corpus
    rises: list[int] = data()  # layers at which that median does not fall
    steps: list[Interval] = data()  # (L-1,) layer l+1 minus layer l of the per-sentence median, l = 1..L-1
    last_minus_first: Interval = data()  # layer L minus layer 1
    uniform: float = data()  # the own share under uniform mixing, mean 1/d_s over hidden tokens


def own_share(corpus: CorpusHTA, seed: int) -> OwnShare:
    """The own-token share's fall with depth, with intervals over sentences for every layer step (C9)."""
    main = corpus.summaries[corpus.main]
    med = main.own_median.to_numpy()
    table = corpus.tables[corpus.main]
    by_sentence = _per_sentence_layers(table, "own")  # (sentences, L)
    n, L = len(by_sentence), int(table.layer.max())

    def diff(a: int, b: int) -> Interval:
        return Interval(*paired_ci(by_sentence[a], by_sentence[b], seed=seed), n=n)

    return OwnShare(
        own_median_first=float(med[0]),
        own_median_last=float(med[-1]),
        own_monotone={k: bool(np.all(np.diff(v.own_median.to_numpy()) < 0)) for k, v in corpus.summaries.items()},
        top_median_last=float(main.top_median.iloc[-1]),
        medians=[float(m) for m in med],
        rises=[int(main.layer[i + 1]) for i in range(len(med) - 1) if med[i + 1] >= med[i]],
        steps=[diff(layer + 1, layer) for layer in range(1, L)],
        last_minus_first=diff(L, 1),
        uniform=float((1 / table.n_tokens).mean()),
    )


@dataclass(frozen=True)
class TopContributor(Study):
    """Section 2 (paper Fig 3b, claim C10): is the own input token still the largest contributor?"""

    lost_top_last_pct: dict  # {corpus: % of hidden tokens whose top contributor is another token, layer L}
    lost_top_max_pct: dict  # {corpus: the same, at the layer where it is largest}
    top_is_self_pct: dict  # {corpus: (L,) % whose top contributor is their own token}
    top_is_self_last: Interval = data()  # share at layer L, exact HTA, interval over sentences
    chance: float = data()  # 1/d_s: the own token on top by chance, mean over those hidden tokens


def top_contributor(corpus: CorpusHTA, exact: list[HTAResult], seed: int) -> TopContributor:
    """Per layer and corpus, how often a hidden token's largest contributor is its own input token; for C10
    the last layer's share on exact HTA (``exact``), since estimator noise biases an argmax."""
    table = token_table(exact)
    last = table[table.layer == table.layer.max()]
    groups = [g.top_is_self.to_numpy(dtype=float) for _, g in last.groupby("sentence")]
    s = corpus.summaries
    return TopContributor(
        lost_top_last_pct={k: float(100 - v.top_is_self_pct.iloc[-1]) for k, v in s.items()},
        lost_top_max_pct={k: float(100 - v.top_is_self_pct.min()) for k, v in s.items()},
        top_is_self_pct={k: v.top_is_self_pct.round(2).tolist() for k, v in s.items()},
        top_is_self_last=Interval(*grouped_ci(groups, np.mean, seed=seed), n=len(groups)),
        chance=float((1 / last.n_tokens).mean()),
    )


@dataclass(frozen=True)
class Locality(Study):
    """Section 3 (paper Fig 4, claim C11): how context divides over neighbours by distance."""

    locality: dict  # {corpus: identifiability.hta.locality columns per layer, rounded to 5 digits}
    profile: pd.DataFrame = data()  # identifiability.hta.distance_profile of the chapter's corpus
    tables: dict[str, pd.DataFrame] = data()  # {corpus: identifiability.hta.locality}
    near_minus_far: list[Interval] = data()  # (L,) within ±RADIUS minus beyond ±FAR, per layer
    far_last_minus_first: Interval = data()  # beyond ±FAR: layer L minus layer 1
    position_only: float = data()  # beyond ±FAR under uniform mixing over the positions present


def context_locality(corpus: CorpusHTA, max_offset: int, seed: int) -> Locality:
    """The context share by neighbour distance (up to ``max_offset``; farther ones pooled), near and far
    shares per corpus against uniform mixing, and per-sentence intervals for C11."""
    results = corpus.results[corpus.main]
    tables = {k: locality(v, radius=RADIUS, far=FAR) for k, v in corpus.results.items()}
    per_sentence = [locality([r], radius=RADIUS, far=FAR) for r in results]
    near, far = f"within_{RADIUS}", f"beyond_{FAR}"
    n, L = len(per_sentence), len(tables[corpus.main])

    def paired(a: list[float], b: list[float]) -> Interval:
        return Interval(*paired_ci(a, b, seed=seed), n=n)

    return Locality(
        locality={k: v.round(5).to_dict(orient="list") for k, v in tables.items()},
        profile=distance_profile(results, max_offset=max_offset).round(5),
        tables=tables,
        near_minus_far=[
            paired([p[near][li] for p in per_sentence], [p[far][li] for p in per_sentence]) for li in range(L)
        ],
        far_last_minus_first=paired([p[far].iloc[-1] for p in per_sentence], [p[far].iloc[0] for p in per_sentence]),
        position_only=float(tables[corpus.main][f"uniform_{far}"].iloc[0]),
    )


@dataclass(frozen=True)
class SegmentCrossing(Study):
    """Sentence pairs: how much of a hidden token's attribution comes from the other segment."""

    cross_segment: dict | None  # identifiability.hta.cross_segment columns; None on single sentences
    table: pd.DataFrame = data()  # layer, share, uniform, pairs (empty on single sentences)

    @property
    def pairs(self) -> int:
        """How many sentence pairs the shares average over (0: the corpus holds single sentences)."""
        return int(self.table.pairs.iloc[0]) if len(self.table) else 0


def segment_crossing(corpus: CorpusHTA) -> SegmentCrossing:
    """The other segment's share per layer on the chapter's corpus, next to uniform mixing."""
    table = cross_segment(corpus.results[corpus.main])
    return SegmentCrossing(cross_segment=table.round(5).to_dict(orient="list") if len(table) else None, table=table)


@dataclass(frozen=True)
class SpecialTokens(Study):
    """Section 4 (paper Figs 18, 25; first part of C12): where the special tokens get their context."""

    special_sources: dict | None  # target, layer, source, share, token; None if the tokenizer adds none
    profile: pd.DataFrame = data()  # target, layer, offset, c, token: contribution by distance into the sentence
    sources: pd.DataFrame = data()  # target, layer, source, share, token: itself / other special / words
    names: dict[str, str] = data()  # {"first": e.g. "[CLS]", "last": e.g. "[SEP]"}
    special_minus_words: Interval | None = data()  # layer L: special tokens' own share minus the median word's


def special_tokens(lm: LoadedModel, corpus: CorpusHTA, seed: int, max_offset: int = 12) -> SpecialTokens:
    """The context of the first and last special token of each sentence (up to ``max_offset`` tokens into
    it), and per sentence at the last layer the special tokens' mean own share minus the median word
    token's (C12; None with fewer than two such sentences)."""
    prof, src = special_profile(corpus.results[corpus.main], max_offset=max_offset)
    ids = lm.tokenizer("a")["input_ids"]
    names = {"first": lm.tokenizer.convert_ids_to_tokens(ids[0]), "last": lm.tokenizer.convert_ids_to_tokens(ids[-1])}
    if not prof.empty:
        prof["token"] = prof.target.map(names)
        src["token"] = src.target.map(names)
    gaps = []
    for _, g in _last_layer(corpus).groupby("sentence"):
        words = g[~g.special]
        if g.special.any() and len(words):
            gaps.append(g[g.special].own.mean() - words.own.median())
    return SpecialTokens(
        special_sources=None if prof.empty else src.round(5).to_dict(orient="list"),
        profile=prof,
        sources=src,
        names=names,
        special_minus_words=_against_zero(gaps, seed),
    )


def _last_layer(corpus: CorpusHTA) -> pd.DataFrame:
    table = corpus.tables[corpus.main]
    return table[table.layer == table.layer.max()]


def _against_zero(values: list[float], seed: int) -> Interval | None:
    """The mean of per-sentence differences with its interval; None with fewer than two sentences."""
    if len(values) < 2:
        return None
    return Interval(*paired_ci(values, np.zeros(len(values)), seed=seed), n=len(values))


@dataclass(frozen=True)
class PartsOfSpeech(Study):
    """Section 5 (paper Figs 26–37; second part of C12): the own share by part of speech."""

    pos_own_median_last: dict  # {POS tag: median own share at layer L}
    table: pd.DataFrame = data()  # identifiability.hta.pos_summary of the chapter's corpus, rounded to 4 digits
    content_minus_function: Interval | None = data()  # layer L, per sentence: content words' mean own share
    # minus function words' (None with fewer than two sentences having both)


def parts_of_speech(corpus: CorpusHTA, seed: int) -> PartsOfSpeech:
    """The median own share per layer and POS tag (tags too rare to be stable left out), and the content
    words' lead over function words at the last layer (C12)."""
    table = corpus.tables[corpus.main]
    L = int(table.layer.max())
    # tags seen fewer than about 15 times per layer are too noisy to show (fewer for tiny samples)
    pos = pos_summary(table, min_count=max(3, min(15, len(table) // (40 * L)))).round(4)
    gaps = []
    for _, g in _last_layer(corpus).groupby("sentence"):
        words = g[~g.special]
        content, function = words[words.tag.isin(CONTENT_TAGS)], words[words.tag.isin(FUNCTION_TAGS)]
        if len(content) and len(function):
            gaps.append(content.own.mean() - function.own.mean())
    last = pos[pos.layer == L]
    return PartsOfSpeech(
        pos_own_median_last={r.tag: float(r["median"]) for _, r in last.iterrows()},
        table=pos,
        content_minus_function=_against_zero(gaps, seed),
    )


RESULTS = (
    ExactHTA,
    EstimatorError,
    CorpusHTA,
    OwnShare,
    TopContributor,
    Locality,
    SegmentCrossing,
    SpecialTokens,
    PartsOfSpeech,
)
