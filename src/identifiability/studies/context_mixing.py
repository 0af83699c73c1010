"""Chapter 6's studies: Hidden Token Attribution (paper section 5), one function per section.

:func:`exact_hta` computes exact HTA of short sentences and the estimator on the same ones;
:func:`token_sample` picks C10's live sentences (the shortest of its recorded sample's first draws,
:mod:`identifiability.recorded.proportional`); :func:`estimator_error` measures the
estimator against exact HTA; :func:`corpus_hta` runs HTA over the sampled corpora, and the section studies
read their results and build each claim's evidence: :func:`own_share` (C9), :func:`top_contributor` (C10),
:func:`context_locality` (C11), :func:`segment_crossing`, :func:`special_tokens`, :func:`parts_of_speech`
and :func:`c12_evidence` (C12). Sentences are the units every interval resamples (the tokens of one
sentence are not independent); hidden tokens are the units of the robustness alternatives named 'unit'.
Layers are numbered 1..L (layer 0, x itself, is left out of every statistic).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import hta
from ..base.stats import Interval, difference_interval, grouped_ci, mean_interval, paired_interval
from ..corpus.corpora import Corpus, token_lengths
from ..corpus.pos import CONTENT_TAGS, FUNCTION_TAGS, word_piece_tags
from ..evidence.context_mixing import C9Evidence, C10Evidence, C11Evidence, C12Evidence
from ..hta import HTAResult, hta_corpus, layer_summary, token_table
from ..models.loaded_model import LoadedModel
from ..recorded import proportional
from ..recorded import store as recorded
from ..recorded.store import Recorded
from . import Study, data

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
    d_model: int = data()  # directions per token of exact HTA


def exact_hta(lm: LoadedModel, texts: list[str], probes: int, seed: int, cache: bool) -> ExactHTA:
    """Exact HTA of ``texts`` and the estimator with ``probes`` random directions per token on them (probe
    seed ``seed + k`` for sentence k), read from or written to the HTA cache when ``cache``."""
    exact = hta_corpus(lm, texts, mode="exact", cache=cache, desc="exact HTA")
    estimated = hta_corpus(lm, texts, mode="estimate", probes=probes, seed=seed, cache=cache, desc="estimated HTA")
    return ExactHTA(
        method=hta.available_method(lm),
        causal=lm.adapter.causal,
        exact_sentences=len(exact),
        exact_tokens_mean=float(np.mean([r.n_tokens for r in exact])),
        exact_seconds_per_sentence=float(np.mean([r.seconds for r in exact])),
        estimate_seconds_per_sentence=float(np.mean([r.seconds for r in estimated])),
        estimator_probes=probes,
        exact=exact,
        estimated=estimated,
        family=lm.adapter.family,
        d_model=lm.d_model,
    )


@dataclass(frozen=True)
class LiveSample(Study):
    """C10's sentences computed live beside the recorded run: the ``live_sentences`` shortest distinct ones
    among the first ``live_from`` draws of its sample (:mod:`identifiability.recorded.proportional`, the recorded run's
    seed; the chapter's without one). They check that this build reproduces the recorded per-sentence numbers;
    chosen for their cost, they are no sample and decide nothing."""

    live_sentences: int  # sentences computed live
    live_from: int  # ... the shortest of the sample's first live_from draws
    live_seed: int  # the sample's seed
    eligible_max_tokens: int  # the longest eligible sentence: the corpus's 95th percentile, tokens
    eligible_covered: float  # share of the corpus's hidden tokens the eligible sentences hold
    texts: list[str] = data()  # the live sentences, shortest first
    indices: list[int] = data()  # their corpus indices
    lengths: list[int] = data()  # their tokens d_s


LIVE_FROM = 8  # the live sentences are the shortest of the sample's first 8 draws (exact HTA costs like d_s^2)


def token_sample(corpus: Corpus, tokenizer, n: int, seed: int, rec: Recorded | None) -> LiveSample:
    """The ``n`` shortest distinct sentences among the first max(n, LIVE_FROM) draws of C10's sample of
    ``corpus`` (sentences in proportion to their tokens, up to the 95th percentile), with the recorded run's
    seed when there is one (``rec``), else ``seed``; ties in draw order."""
    lengths = token_lengths(corpus.sentences, tokenizer)
    pool = proportional.eligible(lengths)
    seed = int(rec.results["seed"]) if rec is not None else seed
    first = max(n, LIVE_FROM)
    picks = proportional.shortest_drawn(pool, lengths, n, first, seed)
    return LiveSample(
        live_sentences=len(picks),
        live_from=first,
        live_seed=seed,
        eligible_max_tokens=pool.max_tokens,
        eligible_covered=pool.covered,
        texts=[corpus.sentences[i] for i in picks],
        indices=picks,
        lengths=[lengths[i] for i in picks],
    )


@dataclass(frozen=True)
class EstimatorError(Study):
    """How far the estimator is from exact HTA, by sentence length, and what that does to the statistics."""

    estimator_error: dict  # identifiability.hta.estimate_error on the short exact sentences
    estimator_error_by_length: dict  # {length of C10's live sentences: median, p95, top_agreement}
    estimator_effect_on_own_median: float  # largest per-layer change of the median own share
    estimator_effect_on_top_is_self_pct: float  # largest per-layer change of % top-is-self, in points
    estimator_probes_for_1pct: int  # probes per token a median error of 1% would take (1/sqrt(probes) law)
    exact_seconds_by_length: dict  # {length of C10's live sentences: mean seconds of exact HTA per sentence}
    by_length: dict[str, dict] = data()  # {length: the whole estimate_error dict}
    probes: int = data()
    d_model: int = data()  # directions per token of exact HTA


def estimator_error(exact: ExactHTA, at_length: ExactHTA) -> EstimatorError:
    """The estimator's error on ``exact``'s sentences and, length by length, on C10's live sentences
    (``at_length``: their exact HTA and estimate), its effect on the per-layer statistics, and the probes a
    1% median error would need."""
    err = hta.estimate_error(exact.exact, exact.estimated)
    by_length, seconds = hta.error_by_length(at_length.exact, at_length.estimated)
    summ_ex = layer_summary(token_table(exact.exact)).set_index("layer")
    summ_es = layer_summary(token_table(exact.estimated)).set_index("layer")
    probes = exact.estimator_probes
    return EstimatorError(
        estimator_error=err,
        estimator_error_by_length={
            k: {m: v[m] for m in ("median", "p95", "top_agreement")} for k, v in by_length.items()
        },
        estimator_effect_on_own_median=float((summ_es.own_median - summ_ex.own_median).abs().max()),
        estimator_effect_on_top_is_self_pct=float((summ_es.top_is_self_pct - summ_ex.top_is_self_pct).abs().max()),
        estimator_probes_for_1pct=int(math.ceil(probes * (err["median"] / TARGET_ERROR) ** 2)),
        exact_seconds_by_length=seconds,
        by_length=by_length,
        probes=probes,
        d_model=exact.d_model,
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


@dataclass(frozen=True)
class OwnShare(Study):
    """Section 1 (paper Fig 3a, claim C9): the input token's own share in its hidden token, per layer."""

    own_median_first: float  # median own share at layer 1, the chapter's corpus
    own_median_last: float  # ... at layer L
    own_monotone: dict  # {corpus: the median falls at every layer step}
    top_median_last: float  # median share of the top contributor at layer L
    medians: list[float] = data()  # (L,) median own share per layer, the chapter's corpus
    rises: list[int] = data()  # layers at which that median does not fall
    evidence: C9Evidence = data()  # the steps and the drop, intervals over sentences and over tokens

    @property
    def uniform(self) -> float:  # the own share under uniform mixing, mean 1/d_s over hidden tokens
        return self.evidence.uniform


def own_share(corpus: CorpusHTA, seed: int) -> OwnShare:
    """The own-token share's fall with depth (C9): every layer step and the first-to-last drop of the
    per-sentence median (intervals over sentences) and of each hidden token's share (over tokens)."""
    main = corpus.summaries[corpus.main]
    med = main.own_median.to_numpy()
    table = corpus.tables[corpus.main]
    by_sentence = hta.per_sentence_layers(table, "own")  # (sentences, L)
    by_token = hta.per_token_layers(table, "own")  # (hidden tokens, L)
    L = int(table.layer.max())

    def steps(t: pd.DataFrame, unit: str = "sentences") -> tuple[Interval, ...]:
        return tuple(paired_interval(t[layer + 1], t[layer], seed, unit) for layer in range(1, L))

    return OwnShare(
        own_median_first=float(med[0]),
        own_median_last=float(med[-1]),
        own_monotone={k: bool(np.all(np.diff(v.own_median.to_numpy()) < 0)) for k, v in corpus.summaries.items()},
        top_median_last=float(main.top_median.iloc[-1]),
        medians=[float(m) for m in med],
        rises=[int(main.layer[i + 1]) for i in range(len(med) - 1) if med[i + 1] >= med[i]],
        evidence=C9Evidence(
            steps=steps(by_sentence),
            last_minus_first=paired_interval(by_sentence[L], by_sentence[1], seed),
            steps_by_tokens=steps(by_token, "hidden tokens"),
            last_minus_first_by_tokens=paired_interval(by_token[L], by_token[1], seed, "hidden tokens"),
            uniform=float((1 / table.n_tokens).mean()),
        ),
    )


def _share_on_top(last: pd.DataFrame, seed: int) -> tuple[Interval, float]:
    """The share of ``last``'s hidden tokens whose top contributor is their own token, pooled, with its
    interval over sentences; and 1/d_s averaged over those tokens (the chance of it)."""
    groups = [g.top_is_self.to_numpy(dtype=float) for _, g in last.groupby("sentence")]
    share = Interval(*grouped_ci(groups, np.mean, seed=seed), n=len(groups), unit="sentences")
    return share, float((1 / last.n_tokens).mean())


@dataclass(frozen=True)
class TopContributor(Study):
    """Section 2 (paper Fig 3b, claim C10): is the own input token still the largest contributor?"""

    lost_top_last_pct: dict  # {corpus: % of hidden tokens whose top contributor is another token, layer L}
    lost_top_max_pct: dict  # {corpus: the same, at the layer where it is largest}
    top_is_self_pct: dict  # {corpus: (L,) % whose top contributor is their own token}
    c10_sample: dict | None  # the recorded run's sample (date, draws, distinct sentences, hidden tokens, ...)
    c10_shares: dict | None  # {all, words, special: [share, low, high]} at layer L from the recorded run
    c10_live: dict  # {share: live per-sentence shares, recorded: the recorded run's for the same sentences}
    caption: str = data()  # the recorded run's caption, or the command that computes it
    evidence: C10Evidence = data()


def top_contributor(
    corpus: CorpusHTA,
    rec: Recorded | None,
    live: LiveSample,
    live_exact: list[HTAResult],
    original: list[HTAResult],
    seed: int,
    command: str,
) -> TopContributor:
    """Per layer and corpus, how often a hidden token's largest contributor is its own input token; C10's
    evidence from the recorded run ``rec`` (its per-sentence numbers, intervals over its draws; None: not
    run, ``command`` computes it), the ``live`` sentences' shares (``live_exact``: their exact HTA) beside
    the recorded ones, and the original rule's share on the short exact sentences (``original``)."""
    first, first_chance = _share_on_top(hta.last_layer(token_table(original)), seed)
    rows_then = {} if rec is None else rec.results["sentences"]
    c10_live = {
        "share": [proportional.sentence_row(r)["share"] for r in live_exact],
        "recorded": [rows_then.get(str(i), {}).get("share") for i in live.indices],
    }
    s = corpus.summaries
    common = dict(
        lost_top_last_pct={k: float(100 - v.top_is_self_pct.iloc[-1]) for k, v in s.items()},
        lost_top_max_pct={k: float(100 - v.top_is_self_pct.min()) for k, v in s.items()},
        top_is_self_pct={k: v.top_is_self_pct.round(2).tolist() for k, v in s.items()},
        c10_live=c10_live,
    )
    if rec is None:
        why = f"no recorded run of C10's sample for this model and corpus: `{command}` computes it"
        e = C10Evidence(None, None, None, None, None, why, first, first_chance, not_run=command)
        return TopContributor(**common, c10_sample=None, c10_shares=None, caption=why, evidence=e)
    r = rec.results
    rows = {int(k): v for k, v in r["sentences"].items()}
    got = proportional.shares(rows, r["draws"], int(r["seed"]))
    shares = {k: None if (x := got[k]) is None else [x.estimate, x.low, x.high] for k in ("all", "words", "special")}
    sample = {
        "date": rec.date,
        "sentences": len(r["draws"]),
        "distinct": len(rows),
        "hidden_tokens": int(sum(v["tokens"] for v in rows.values())),
        "covered": float(r["eligible"]["covered"]),
        "max_tokens": int(r["eligible"]["max_tokens"]),
        "half_width": float((got["all"].high - got["all"].low) / 2),
    }
    caption = recorded.caption(rec)
    e = C10Evidence(
        share=got["all"],
        words=got["words"],
        special=got["special"],
        chance=got["chance"],
        word_chance=got["word_chance"],
        sample=f"{proportional.describe(sample)} ({caption})",
        original=first,
        original_chance=first_chance,
    )
    return TopContributor(**common, c10_sample=sample, c10_shares=shares, caption=caption, evidence=e)


@dataclass(frozen=True)
class Locality(Study):
    """Section 3 (paper Fig 4, claim C11): how context divides over neighbours by distance."""

    locality: dict  # {corpus: identifiability.hta.locality columns per layer (window sums), rounded to 5 digits}
    window_means: dict  # {corpus: layer, near, far (mean contribution of one input token), uniform (1/d_s),
    # far_share (f, the far share of the context), far_share_uniform (n_far / (d_s - 1))}
    profile: pd.DataFrame = data()  # identifiability.hta.distance_profile of the chapter's corpus
    tables: dict[str, pd.DataFrame] = data()  # {corpus: identifiability.hta.locality}
    means: dict[str, pd.DataFrame] = data()  # {corpus: window_means per layer}
    evidence: C11Evidence = data()


@dataclass(frozen=True)
class _C11Intervals:
    """C11's intervals at one pair of windows and one unit (see :class:`C11Evidence`)."""

    near_minus_far: tuple[Interval, ...]  # (L,) per layer, near minus far per-token mean
    far_share_growth: Interval  # f at layer L minus layer 1 (version 4's long-range part)
    far_growth: Interval  # far per-token mean at layer L minus layer 1 (version 3's)
    dilution_growth: Interval  # the growth of the far per-token mean that dilution alone predicts
    far_growth_minus_dilution: Interval  # the far per-token mean at L, observed minus predicted by dilution


def _c11_intervals(results: list[HTAResult], near: int, far: int, by_tokens: bool, seed: int) -> _C11Intervals:
    """Per layer near minus far of the per-token means; the far share of the context f at layer L minus
    layer 1; the far per-token mean's growth and what dilution of the own token predicts of it. Per hidden
    token, averaged per sentence with intervals over sentences, or (``by_tokens``) intervals over hidden
    tokens."""
    columns = ("near", "far", "far_share", "own", "n_tokens")
    units = hta.window_units(results, near, far, by_tokens, columns)
    L = results[0].c.shape[0] - 1
    if units is None:  # no hidden token has an input token beyond ``far``
        empty = Interval(math.nan, math.nan, math.nan, 0)
        return _C11Intervals(tuple(empty for _ in range(L)), empty, empty, empty, empty)
    near_t, far_t, f, own, n = units  # (units, L) each; n is d_s, the same at every layer
    name = "hidden tokens" if by_tokens else "sentences"
    # dilution: the own token's lost share spread evenly over the d_s - 1 other tokens; linear per token,
    # so the per-sentence mean of the prediction is the prediction from the per-sentence means
    diluted = (own[1] - own[L]) / (n[1] - 1)
    return _C11Intervals(
        near_minus_far=tuple(paired_interval(near_t[layer], far_t[layer], seed, name) for layer in range(1, L + 1)),
        far_share_growth=paired_interval(f[L], f[1], seed, name),
        far_growth=paired_interval(far_t[L], far_t[1], seed, name),
        dilution_growth=mean_interval(diluted.to_numpy(), seed, name),
        far_growth_minus_dilution=paired_interval(far_t[L], far_t[1] + diluted, seed, name),
    )


def context_locality(
    corpus: CorpusHTA, max_offset: int, seed: int, windows: tuple[tuple[int, int], tuple[int, int]]
) -> Locality:
    """The context by neighbour distance (up to ``max_offset``; farther ones pooled), and C11's evidence: the
    mean contribution of one near and one far input token per hidden token (word tokens; the special ones
    are section 4's) and the far share of its context, per sentence, with the alternative distances and
    unit, version 3's far per-token mean growth against dilution, and the original rule's window sums.
    ``windows``: ((near, far), (near, far) of the 'distances' alternative), near the distances 1..near and
    far those beyond far (the chapter passes C11's rule's)."""
    (n_near, n_far), (alt_near, alt_far) = windows
    results = corpus.results[corpus.main]
    tables = {k: hta.locality(v, radius=n_near, far=n_far) for k, v in corpus.results.items()}
    means = {k: hta.window_summary(v, n_near, n_far) for k, v in corpus.results.items()}
    per_sentence = [hta.locality([r], radius=n_near, far=n_far) for r in results]
    near, far = f"within_{n_near}", f"beyond_{n_far}"
    L = len(tables[corpus.main])
    L_far = len(means[corpus.main])  # 0 where no hidden token has an input token beyond n_far
    main = _c11_intervals(results, n_near, n_far, False, seed)
    alt = _c11_intervals(results, alt_near, alt_far, False, seed)
    tokens = _c11_intervals(results, n_near, n_far, True, seed)
    return Locality(
        locality={k: v.round(5).to_dict(orient="list") for k, v in tables.items()},
        window_means={k: v.round(6).to_dict(orient="list") for k, v in means.items()},
        profile=hta.distance_profile(results, max_offset=max_offset).round(5),
        tables=tables,
        means=means,
        evidence=C11Evidence(
            windows=((n_near, n_far), (alt_near, alt_far)),
            near_minus_far=main.near_minus_far,
            far_share_growth=main.far_share_growth,
            near_minus_far_alt=alt.near_minus_far,
            far_share_growth_alt=alt.far_share_growth,
            near_minus_far_by_tokens=tokens.near_minus_far,
            far_share_growth_by_tokens=tokens.far_share_growth,
            far_growth=main.far_growth,
            dilution_growth=main.dilution_growth,
            far_growth_minus_dilution=main.far_growth_minus_dilution,
            original_near_minus_far=tuple(
                paired_interval([p[near][li] for p in per_sentence], [p[far][li] for p in per_sentence], seed)
                for li in range(L)
            ),
            original_far_growth=paired_interval(
                [p[far].iloc[-1] for p in per_sentence], [p[far].iloc[0] for p in per_sentence], seed
            ),
            position_only=float(tables[corpus.main][f"uniform_{far}"].iloc[0]),
            far_share_uniform=float(means[corpus.main].far_share_uniform.mean()) if L_far else math.nan,
        ),
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
    table = hta.cross_segment(corpus.results[corpus.main])
    return SegmentCrossing(cross_segment=table.round(5).to_dict(orient="list") if len(table) else None, table=table)


@dataclass(frozen=True)
class SpecialTokens(Study):
    """Section 4 (paper Figs 18, 25; first part of C12): where the special tokens get their context."""

    special_sources: dict | None  # target, layer, source, share, token; None if the tokenizer adds none
    profile: pd.DataFrame = data()  # target, layer, offset, c, token: contribution by distance into the sentence
    sources: pd.DataFrame = data()  # target, layer, source, share, token: itself / other special / words
    names: dict[str, str] = data()  # {"first": e.g. "[CLS]", "last": e.g. "[SEP]"}
    special_minus_words: Interval | None = data()  # layer L, per sentence: special tokens' own share minus the
    # median word token's (None: no sentence has special tokens)
    special_minus_words_by_tokens: Interval | None = data()  # the same per special token, interval over them


def special_tokens(lm: LoadedModel, corpus: CorpusHTA, seed: int, max_offset: int = 12) -> SpecialTokens:
    """The context of the first and last special token of each sentence (up to ``max_offset`` tokens into
    it), and at the last layer the special tokens' own share minus the median word token's of the same
    sentence (C12), per sentence and per special token."""
    prof, src = hta.special_profile(corpus.results[corpus.main], max_offset=max_offset)
    ids = lm.tokenizer("a")["input_ids"]
    names = {"first": lm.tokenizer.convert_ids_to_tokens(ids[0]), "last": lm.tokenizer.convert_ids_to_tokens(ids[-1])}
    if not prof.empty:
        prof["token"] = prof.target.map(names)
        src["token"] = src.target.map(names)
    gaps, token_gaps = hta.special_gaps(hta.last_layer(corpus.tables[corpus.main]))
    return SpecialTokens(
        special_sources=None if prof.empty else src.round(5).to_dict(orient="list"),
        profile=prof,
        sources=src,
        names=names,
        special_minus_words=mean_interval(gaps, seed),
        special_minus_words_by_tokens=mean_interval(token_gaps, seed, "special tokens"),
    )


@dataclass(frozen=True)
class PartsOfSpeech(Study):
    """Section 5 (paper Figs 26–37; second part of C12): the own share by part of speech."""

    pos_own_median_last: dict  # {POS tag: median own share at layer L}
    table: pd.DataFrame = data()  # identifiability.hta.pos_summary of the chapter's corpus, rounded to 4 digits
    content_minus_function: Interval | None = data()  # layer L, per sentence: content words' mean own share
    # minus function words' (None: no sentence has both)
    content_minus_function_no_adv: Interval | None = data()  # the same without ADV among the content words
    content_minus_function_by_tokens: Interval | None = data()  # pooled over tokens, interval over tokens


def parts_of_speech(corpus: CorpusHTA, seed: int) -> PartsOfSpeech:
    """The median own share per layer and POS tag (tags too rare to be stable left out), and the content
    words' lead over function words at the last layer (C12): per sentence, without ADV, and per token."""
    table = corpus.tables[corpus.main]
    L = int(table.layer.max())
    # tags seen fewer than about 15 times per layer are too noisy to show (fewer for tiny samples)
    pos = hta.pos_summary(table, min_count=max(3, min(15, len(table) // (40 * L)))).round(4)
    last = hta.last_layer(table)
    words, no_adv = last[~last.special], tuple(t for t in CONTENT_TAGS if t != "ADV")
    shown = pos[pos.layer == L]
    return PartsOfSpeech(
        pos_own_median_last={r.tag: float(r["median"]) for _, r in shown.iterrows()},
        table=pos,
        content_minus_function=mean_interval(hta.content_gaps(last, CONTENT_TAGS, FUNCTION_TAGS), seed),
        content_minus_function_no_adv=mean_interval(hta.content_gaps(last, no_adv, FUNCTION_TAGS), seed),
        content_minus_function_by_tokens=difference_interval(
            words.own[words.tag.isin(CONTENT_TAGS)], words.own[words.tag.isin(FUNCTION_TAGS)], seed
        ),
    )


def c12_evidence(special: SpecialTokens, pos: PartsOfSpeech, uniform: float) -> C12Evidence:
    """C12's evidence from the special-token and part-of-speech sections (``uniform``: 1/d_s, section 1)."""
    return C12Evidence(
        special_minus_words=special.special_minus_words,
        content_minus_function=pos.content_minus_function,
        content_minus_function_no_adv=pos.content_minus_function_no_adv,
        special_minus_words_by_tokens=special.special_minus_words_by_tokens,
        content_minus_function_by_tokens=pos.content_minus_function_by_tokens,
        uniform=uniform,
    )


RESULTS = (
    ExactHTA,
    LiveSample,
    EstimatorError,
    CorpusHTA,
    OwnShare,
    TopContributor,
    Locality,
    SegmentCrossing,
    SpecialTokens,
    PartsOfSpeech,
)
