"""Chapter 6's studies on a tiny random BERT and on synthetic attributions with known answers: what each
study records, the intervals it hands to the verdicts (their estimates, their units), and the theory behind
each quantity."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from identifiability.corpora import Corpus, sample_sentences
from identifiability.hta import (
    HTAResult,
    estimate_error,
    hidden_graph,
    layer_summary,
    locality,
    token_table,
    window_means,
)
from identifiability.stats import Interval
from identifiability.studies import context_mixing as study
from identifiability.studies import schema_of
from identifiability.verdicts.context_mixing import C11_WINDOWS

PROBES = 4


@pytest.fixture(scope="module")
def exact_run(tiny_lm, sentences):
    return study.exact_hta(tiny_lm, sentences[:2], PROBES, seed=0, cache=False)


@pytest.fixture(scope="module")
def tiny_corpus(tiny_lm, sentences):
    return study.corpus_hta(
        tiny_lm, {"a": sentences, "b": sentences[:1]}, "estimate", PROBES, seed=0, max_tokens=64, cache=False
    )


def _result(c: torch.Tensor, special: list[bool] | None = None) -> HTAResult:
    """An HTAResult whose contributions are ``c`` ((L+1, n, n), rows summing to 1): S = c² gives back c."""
    n = c.shape[-1]
    return HTAResult("x", [f"t{i}" for i in range(n)], c.double() ** 2, "synthetic", special=special or [False] * n)


def _own(n: int, shares: list[float]) -> torch.Tensor:
    """(L+1, n, n): at layer l every token keeps ``shares[l - 1]`` of itself, the rest spread evenly."""
    eye = torch.eye(n, dtype=torch.float64)
    layers = [eye] + [a * eye + (1 - a) / (n - 1) * (1 - eye) for a in shares]
    return torch.stack(layers)


def _typical(results: list[HTAResult]) -> study.TypicalSample:
    """A TypicalSample naming ``results``' sentences, one quarter each (what top_contributor reads of it)."""
    n = [r.n_tokens for r in results]
    return study.TypicalSample(
        typical_median_tokens=max(n),
        typical_quarters=[[min(n), max(n)]] * 4,
        typical_sentences=[len(results), 0, 0, 0],
        typical_reused=0,
        texts=[r.text for r in results],
        quarter=[0] * len(results),
    )


def _corpus(results: list[HTAResult], tags: list[list[str]] | None = None) -> study.CorpusHTA:
    """A CorpusHTA of synthetic results (one corpus, "syn"), as corpus_hta assembles it from the engine's."""
    table = token_table(results, tags)
    return study.CorpusHTA(
        corpus_mode="exact",
        corpus_sentences={"syn": len(results)},
        corpus_tokens={"syn": sum(r.n_tokens for r in results)},
        corpus_seconds=0.0,
        layer_summary={},
        main="syn",
        results={"syn": results},
        tables={"syn": table},
        summaries={"syn": layer_summary(table)},
    )


def test_the_chapter_records_the_keys_it_always_recorded():
    assert set(schema_of(*study.RESULTS)) == {
        "causal", "corpus_mode", "corpus_seconds", "corpus_sentences", "corpus_tokens", "cross_segment",
        "estimate_seconds_per_sentence", "estimator_effect_on_own_median", "estimator_effect_on_top_is_self_pct",
        "estimator_error", "estimator_error_by_length", "estimator_probes", "estimator_probes_for_1pct",
        "exact_seconds_per_sentence", "exact_sentences", "exact_tokens_mean", "layer_summary", "locality",
        "lost_top_last_pct", "lost_top_max_pct", "method", "own_median_first", "own_median_last", "own_monotone",
        "pos_own_median_last", "special_sources", "top_is_self_pct", "top_median_last",
        # C10's sample of typical lengths and its shares, C11's per-token means (amended rules)
        "typical_median_tokens", "typical_quarters", "typical_sentences", "typical_reused", "typical_top_is_self",
        "window_means", "exact_seconds_by_length",
    }  # fmt: skip


def test_exact_hta_is_the_reverse_mode_row_by_hand(tiny_lm, sentences, exact_run):
    """The chapter's visible cell: every block of one hidden token by reverse mode, its Frobenius norm,
    normalised over the input tokens, is the engine's row of c."""
    r = exact_run.record()
    assert r["method"] == "folded" and r["causal"] is False and r["estimator_probes"] == PROBES
    assert r["exact_sentences"] == 2 and r["exact_tokens_mean"] == np.mean([x.n_tokens for x in exact_run.exact])
    hs, x = hidden_graph(tiny_lm, sentences[0])
    layer, i = tiny_lm.n_layers, 1
    (J,) = torch.autograd.grad(hs[layer][0, i], x, torch.eye(tiny_lm.d_model), is_grads_batched=True)
    c_hat = J.pow(2).sum((0, 2)).sqrt()
    c_row = (c_hat / c_hat.sum()).double()
    assert torch.allclose(exact_run.exact[0].c[layer, i], c_row, atol=1e-5)
    # the estimate is another computation of the same quantity: close, not equal
    est = exact_run.estimated[0].c
    assert not torch.equal(est, exact_run.exact[0].c) and (est - exact_run.exact[0].c).abs().max() < 0.5


def test_estimator_error_vanishes_at_full_rank(tiny_lm, sentences):
    """Orthonormal probes spanning all d directions of a token are exact: no error, no effect, 1% for free."""
    full = study.exact_hta(tiny_lm, sentences[:1], tiny_lm.d_model, seed=0, cache=False)
    typical = study.median_sample(Corpus("t", sentences[:1]), tiny_lm.tokenizer, 1, seed=0)
    e = study.estimator_error(full, typical, full)
    assert e.estimator_error["max"] < 1e-6 and e.estimator_error["top_agreement"] == 1.0
    assert abs(e.estimator_error["signed_median"]) < 1e-6
    assert e.estimator_effect_on_own_median < 1e-6 and e.estimator_effect_on_top_is_self_pct == 0
    assert e.estimator_probes_for_1pct <= 1


def test_estimator_error_by_length_and_the_probes_for_one_percent(tiny_lm, sentences, exact_run):
    """The error on the short exact sentences, and quarter by quarter on C10's sample (its own exact HTA)."""
    typical = study.median_sample(Corpus("t", sentences), tiny_lm.tokenizer, 1, seed=0)
    at_length = study.exact_hta(tiny_lm, typical.texts, PROBES, seed=0, cache=False)
    e = study.estimator_error(exact_run, typical, at_length)
    err = e.estimator_error
    assert 0 < err["median"] <= err["p95"] <= err["max"] and abs(err["signed_median"]) <= err["median"]
    # the error falls like 1/sqrt(probes): the probes that bring the median to 1%
    assert e.estimator_probes_for_1pct == math.ceil(PROBES * (err["median"] / 0.01) ** 2)
    # one band per quarter that holds a sentence, measured on that quarter's sentences alone
    bands = [f"{lo}-{hi} tokens" for (lo, hi), n in zip(typical.typical_quarters, typical.typical_sentences) if n]
    assert list(e.by_length) == bands
    first = [k for k, q in enumerate(typical.quarter) if q == typical.quarter[0]]
    alone = estimate_error([at_length.exact[k] for k in first], [at_length.estimated[k] for k in first])
    assert e.by_length[bands[0]] == alone
    assert list(e.exact_seconds_by_length) == bands
    assert e.exact_seconds_by_length[bands[0]] == pytest.approx(np.mean([at_length.exact[k].seconds for k in first]))
    assert e.estimator_error_by_length == {
        k: {m: v[m] for m in ("median", "p95", "top_agreement")} for k, v in e.by_length.items()
    }
    ex = layer_summary(token_table(exact_run.exact)).own_median
    es = layer_summary(token_table(exact_run.estimated)).own_median
    assert e.estimator_effect_on_own_median == pytest.approx(float((ex - es).abs().max()))


def test_corpus_hta_summarises_every_corpus(tiny_lm, sentences, tiny_corpus):
    r = tiny_corpus.record()
    assert r["corpus_mode"] == "estimate" and tiny_corpus.main == "a"
    assert r["corpus_sentences"] == {"a": 3, "b": 1}
    assert r["corpus_tokens"]["a"] == sum(len(tiny_lm.tokenizer(s)["input_ids"]) for s in sentences)
    L = tiny_lm.n_layers
    assert r["layer_summary"]["a"]["layer"] == list(range(1, L + 1))
    # the per-layer median own share is the median of the diagonal c[l, i, i] over every hidden token
    own = torch.cat([res.c[1:].diagonal(dim1=-2, dim2=-1) for res in tiny_corpus.results["a"]], dim=-1)
    assert r["layer_summary"]["a"]["own_median"] == pytest.approx(own.quantile(0.5, dim=-1).tolist(), abs=1e-5)
    assert set(tiny_corpus.tables["a"].tag) >= {"[CLS]", "[SEP]", "NOUN"}  # POS tags, special tokens their own


def test_own_share_steps_and_drop_over_sentences_and_over_tokens():
    """Three sentences whose own share falls 0.2 per layer (and differs by sentence): each step is -0.2,
    resampled over the 3 sentences or over their 18 hidden tokens (robustness 'unit')."""
    results = [_result(_own(n, [0.9 - k * 0.01, 0.7 - k * 0.01, 0.5 - k * 0.01])) for k, n in enumerate((5, 6, 7))]
    r = study.own_share(_corpus(results), seed=0)
    e = r.evidence
    assert [s.estimate for s in e.steps] == pytest.approx([-0.2, -0.2])
    assert e.last_minus_first.estimate == pytest.approx(-0.4)
    assert all(s.n == 3 and s.low <= s.estimate <= s.high for s in [*e.steps, e.last_minus_first])
    assert [s.estimate for s in e.steps_by_tokens] == pytest.approx([-0.2, -0.2])
    assert all(s.n == 18 for s in [*e.steps_by_tokens, e.last_minus_first_by_tokens])
    assert r.own_monotone == {"syn": True} and r.rises == []
    assert r.own_median_first == pytest.approx(0.89) and r.own_median_last == pytest.approx(0.49)
    assert r.uniform == pytest.approx(np.mean([1 / n for n in (5, 6, 7) for _ in range(n)]))


def test_own_share_by_tokens_weighs_tokens_not_sentences():
    """A long sentence that loses much and a short one that loses little: per sentence each counts once,
    per token the long one counts by its tokens."""
    long, short = _result(_own(9, [0.8, 0.2])), _result(_own(3, [0.8, 0.7]))
    e = study.own_share(_corpus([long, short]), seed=0).evidence
    assert e.last_minus_first.estimate == pytest.approx((-0.6 - 0.1) / 2)
    assert e.last_minus_first_by_tokens.estimate == pytest.approx((9 * -0.6 + 3 * -0.1) / 12)


def test_own_share_finds_a_rise_and_has_no_interval_from_one_sentence():
    rising = study.own_share(_corpus([_result(_own(5, [0.8, 0.6, 0.7]))]), seed=0)
    e = rising.evidence
    assert rising.own_monotone == {"syn": False} and rising.rises == [3]
    assert e.steps[1].estimate == pytest.approx(0.1)
    assert all(not s.has_interval and s.n == 1 for s in [*e.steps, e.last_minus_first])


def test_top_contributor_resamples_sentences_not_tokens():
    """One sentence whose tokens all keep the top place and one where all lose it: resampling the two
    sentences gives 0 to 1; resampling their 12 tokens would give a narrow interval around 0.5."""
    keep, lose = _result(_own(6, [0.5, 0.5])), _result(_own(6, [0.5, 0.1]))  # 0.1 < 0.9 / 5 spread to others
    r = study.top_contributor(_corpus([keep, lose]), _typical([keep, lose]), [keep, lose], [keep], seed=0)
    e = r.evidence
    assert e.share.estimate == 0.5 and e.share.n == 2
    assert (e.share.low, e.share.high) == (0.0, 1.0)
    assert r.top_is_self_pct == {"syn": [100.0, 50.0]}
    assert r.lost_top_last_pct == {"syn": 50.0} and r.lost_top_max_pct == {"syn": 50.0}
    assert e.chance == pytest.approx(1 / 6)
    # the original rule's sample is its own: here the sentence that keeps the top place
    assert e.original.estimate == 1.0 and not e.original.has_interval and e.original_chance == pytest.approx(1 / 6)
    one = study.top_contributor(_corpus([keep]), _typical([keep]), [keep], [keep], seed=0)
    assert one.evidence.share.estimate == 1.0 and not one.evidence.share.has_interval


def test_top_contributor_reports_words_and_special_tokens_apart():
    """The special tokens (first and last) lose the top place, the words keep it: all hidden tokens 4 of 6,
    words 4 of 4, special tokens 0 of 2, each with its own chance 1/d_s."""
    c = _own(6, [0.5, 0.5])
    for i in (0, 5):  # the special tokens keep 0.1 and give 0.5 to their neighbour
        c[2, i] = 0.4 / 4
        c[2, i, i], c[2, i, 1 if i == 0 else 4] = 0.1, 0.5
    sentence = _result(c, [True, False, False, False, False, True])
    r = study.top_contributor(_corpus([sentence] * 3), _typical([sentence] * 3), [sentence] * 3, [sentence], seed=0)
    e = r.evidence
    assert (e.share.estimate, e.words.estimate, e.special.estimate) == pytest.approx((4 / 6, 1.0, 0.0))
    assert e.word_chance == pytest.approx(1 / 6) and e.share.n == e.words.n == e.special.n == 3
    assert r.typical_top_is_self["special"] == [0.0, 0.0, 0.0]
    plain = _result(_own(6, [0.5, 0.5]))
    none = study.top_contributor(_corpus([plain] * 2), _typical([plain] * 2), [plain] * 2, [plain], seed=0)
    assert none.evidence.special is None and none.typical_top_is_self["special"] is None


def _lengths_corpus(counts: dict[int, int]) -> Corpus:
    """Sentences of ``n`` words, ``counts[n]`` of each (``token_lengths`` counts words without a tokenizer)."""
    return Corpus("w", [" ".join(f"w{n}x{k}y{i}" for i in range(n)) for n, m in counts.items() for k in range(m)])


def test_median_sample_takes_equal_numbers_from_each_quarter_up_to_the_median():
    counts = {n: 2 + n % 3 for n in range(6, 41)}  # lengths 6..40 words
    corpus = _lengths_corpus(counts)
    t = study.median_sample(corpus, None, per_quarter=3, seed=1)
    lengths = [len(x.split()) for x in corpus.sentences]
    median = int(np.median(lengths))
    assert t.typical_median_tokens == median and t.typical_quarters[0][0] == 6 and t.typical_quarters[-1][1] == median
    # the quarters tile [6, median] without gaps, each a quarter of the range
    flat = [n for lo, hi in t.typical_quarters for n in range(lo, hi + 1)]
    assert flat == list(range(6, median + 1))
    assert t.typical_sentences == [3, 3, 3, 3] and t.typical_reused == 0 and len(set(t.texts)) == 12
    for text, q in zip(t.texts, t.quarter):
        lo, hi = t.typical_quarters[q]
        assert lo <= len(text.split()) <= hi <= median
    assert t.texts == study.median_sample(corpus, None, per_quarter=3, seed=1).texts  # seeded
    assert t.texts != study.median_sample(corpus, None, per_quarter=3, seed=2).texts
    # a quarter with fewer sentences than asked gives all it has
    few = study.median_sample(_lengths_corpus({6: 1, 7: 1, 8: 1, 9: 1, 10: 5}), None, per_quarter=3, seed=0)
    assert sum(few.typical_sentences) == len(few.texts) and few.typical_sentences[0] == 1


def test_median_sample_reusing_an_earlier_sample_stays_uniform_within_each_quarter():
    """The short exact sentences are a uniform sample of a length window; taken first in the quarters that lie
    inside that window, they leave every sentence of a quarter equally likely to be drawn (the quarter's
    inclusion rate, per_quarter / its size), and they are reused. A quarter that sticks out of the window
    reuses none (its earlier sentences would all be short ones)."""
    corpus = _lengths_corpus({n: 6 for n in range(6, 31)})  # median 18: quarters 6-8, 9-11, 12-14, 15-18
    window = (6, 13)  # the earlier sample's lengths: the first two quarters lie inside, the third sticks out
    drawn: dict[str, int] = {}
    runs, reused = 600, 0
    for seed in range(runs):
        earlier = sample_sentences(corpus, 12, seed + 1000, None, min_tokens=window[0], max_tokens=window[1])
        t = study.median_sample(corpus, None, 2, seed, earlier=earlier, earlier_tokens=window)
        assert t.typical_quarters[:3] == [[6, 8], [9, 11], [12, 14]]
        reused += t.typical_reused
        for x in t.texts:
            drawn[x] = drawn.get(x, 0) + 1
    assert reused > runs  # most first-half draws are earlier sentences
    # every quarter, the third too (where taking the earlier 12- and 13-word sentences first would over-draw
    # them): 2 of 18 per run, 1/9 each, within sampling noise (binomial sd about 0.013 over 600 runs)
    for lo, hi in ((6, 8), (9, 11), (12, 14)):
        members = [x for x in corpus.sentences if lo <= len(x.split()) <= hi]
        rates = np.array([drawn.get(x, 0) / runs for x in members])
        assert abs(rates.mean() - 2 / 18) < 1e-9 and rates.min() > 2 / 18 - 0.045 and rates.max() < 2 / 18 + 0.045
        by_length = [rates[[len(x.split()) == n for x in members]].mean() for n in range(lo, hi + 1)]
        assert max(by_length) - min(by_length) < 0.03


def _neighbours_then_uniform(n: int) -> torch.Tensor:
    """(3, n, n): layer 1 keeps half and takes the rest from the next token (the previous one for the last),
    layer 2 keeps half and spreads the rest evenly."""
    eye = torch.eye(n, dtype=torch.float64)
    nxt = torch.diag(torch.ones(n - 1, dtype=torch.float64), 1)
    nxt[-1, -2] = 1.0
    return torch.stack([eye, 0.5 * eye + 0.5 * nxt, 0.5 * eye + 0.5 / (n - 1) * (1 - eye)])


def _kept_near_sizes(n: int, near: int, far: int) -> list[int]:
    """For every hidden token of an n-token sentence that has an input token beyond ``far``: how many input
    tokens lie at distance 1..``near`` (by counting, not by the package's masks)."""
    kept = [i for i in range(n) if any(abs(j - i) > far for j in range(n))]
    return [sum(1 for j in range(n) if 1 <= abs(j - i) <= near) for i in kept]


def test_window_means_are_per_token_means_and_equal_under_uniform_mixing():
    """Layer 1 gives half of each hidden token to its next neighbour: one near token contributes 0.5 over the
    near window's size, one far token nothing; layer 2 spreads half evenly: one token anywhere 0.5/(n-1).
    Under uniform mixing one near and one far token both contribute 1/d_s."""
    n = 14
    w = window_means([_result(_neighbours_then_uniform(n))], 3, 8)
    first = w[w.layer == 1]
    assert list(first.position) == [0, 1, 2, 3, 4, 9, 10, 11, 12, 13]  # the tokens with an input beyond 8
    assert list(first.near) == pytest.approx([0.5 / k for k in _kept_near_sizes(n, 3, 8)])
    assert list(first.far) == pytest.approx([0.0] * 10)
    second = w[w.layer == 2]
    assert list(second.near) == pytest.approx([0.5 / (n - 1)] * 10) and list(second.far) == pytest.approx(
        [0.5 / (n - 1)] * 10
    )
    uniform = window_means([_result(torch.full((2, n, n), 1.0 / n, dtype=torch.float64))], 3, 8)
    assert list(uniform.near) == pytest.approx([1 / n] * 10) and list(uniform.far) == pytest.approx([1 / n] * 10)
    # special tokens are left out as hidden tokens; a sentence too short for a far token gives no row
    special = [True] + [False] * (n - 2) + [True]
    assert 0 not in set(window_means([_result(_neighbours_then_uniform(n), special)], 3, 8).position)
    assert window_means([_result(_neighbours_then_uniform(9))], 3, 8).empty


def test_locality_near_far_and_growth_on_known_contributions():
    """C11's evidence from per-token means, per sentence (and per token, and at the other distances), and
    the original rule's window sums, on contributions whose answers are counted by hand."""
    lengths = (14, 16, 18)
    results = [_result(_neighbours_then_uniform(n)) for n in lengths]
    loc = study.context_locality(_corpus(results), max_offset=10, seed=0, windows=C11_WINDOWS)
    e = loc.evidence

    def by_sentence(near: int, far: int) -> float:
        return float(np.mean([np.mean([0.5 / k for k in _kept_near_sizes(n, near, far)]) for n in lengths]))

    assert e.near_minus_far[0].estimate == pytest.approx(by_sentence(3, 8)) and e.near_minus_far[0].low > 0
    assert e.near_minus_far[1].estimate == pytest.approx(0.0, abs=1e-12)  # uniform over the others: a tie
    assert e.near_minus_far_alt[0].estimate == pytest.approx(by_sentence(2, 5))
    # one far token gives nothing in layer 1 and 0.5/(n-1) in layer 2, per sentence
    assert e.far_growth.estimate == pytest.approx(np.mean([0.5 / (n - 1) for n in lengths])) and e.far_growth.low > 0
    # the own share stays 0.5, so dilution predicts no growth: all of it is the context widening
    assert e.dilution_growth.estimate == pytest.approx(0.0, abs=1e-12)
    assert e.far_growth_minus_dilution.estimate == pytest.approx(e.far_growth.estimate)

    # the far share of the context: 0 in layer 1, n_far/(n-1) in layer 2, per kept token
    def far_share(n: int, far: int) -> float:
        kept = [i for i in range(n) if any(abs(j - i) > far for j in range(n))]
        return float(np.mean([sum(abs(j - i) > far for j in range(n)) / (n - 1) for i in kept]))

    assert e.far_share_growth.estimate == pytest.approx(np.mean([far_share(n, 8) for n in lengths]))
    assert e.far_share_growth_alt.estimate == pytest.approx(np.mean([far_share(n, 5) for n in lengths]))
    assert e.far_share_uniform == pytest.approx(np.mean([far_share(n, 8) for n in lengths]))
    ivs = [*e.near_minus_far, e.far_growth, *e.near_minus_far_alt, e.far_share_growth, e.far_share_growth_alt]
    assert all(iv.n == 3 for iv in [*ivs, e.dilution_growth, e.far_growth_minus_dilution])
    # per token: every kept token of every sentence counts once
    sizes = [k for n in lengths for k in _kept_near_sizes(n, 3, 8)]
    assert e.near_minus_far_by_tokens[0].estimate == pytest.approx(np.mean([0.5 / k for k in sizes]))
    assert e.near_minus_far_by_tokens[0].n == len(sizes) == e.far_share_growth_by_tokens.n
    # the original rule's window sums: all context within 3 in layer 1, the uniform shares in layer 2
    t = loc.tables["syn"]
    assert list(t.within_3) == pytest.approx([1.0, t.uniform_within_3.iloc[0]])
    assert list(t.beyond_8) == pytest.approx([0.0, t.uniform_beyond_8.iloc[0]])
    assert e.original_near_minus_far[0].estimate == pytest.approx(1.0)
    per = [locality([r]).beyond_8.iloc[-1] for r in results]
    assert e.original_far_growth.estimate == pytest.approx(np.mean(per)) and e.original_far_growth.low > 0
    assert e.position_only == pytest.approx(t.uniform_beyond_8.iloc[0])
    assert loc.locality["syn"]["within_3"] == pytest.approx(list(t.within_3), abs=1e-5)
    # the table's per-layer means, averaged per sentence, next to 1/d_s averaged the same way
    m = loc.window_means["syn"]
    assert m["far"] == pytest.approx([0.0, np.mean([0.5 / (n - 1) for n in lengths])], abs=1e-6)
    assert m["uniform"] == pytest.approx([np.mean([1 / n for n in lengths])] * 2, abs=1e-6)
    assert set(loc.profile.offset) == set(range(-11, 12))


def test_far_share_of_the_context_by_a_plain_loop(tiny_corpus):
    """C11's f and the dilution prediction, computed token by token with Python loops over the tiny model's
    HTA (no masks, no pandas), against the study's vectorised evidence: per hidden token i at layer l,
    f = sum of c_ij over |i - j| > 8 divided by 1 - c_ii; the special tokens and the tokens with no input
    beyond 8 left out; the mean per sentence; the mean over sentences of f at L minus f at 1."""
    results = tiny_corpus.results["a"]
    L = results[0].c.shape[0] - 1
    growth, excess = [], []
    for r in results:
        n, c = r.n_tokens, r.c.tolist()
        kept = [i for i in range(n) if not r.special[i] and any(abs(i - j) > 8 for j in range(n))]
        if not kept:
            continue

        def f(layer: int, i: int, n: int = n, c: list = c) -> float:
            far = 0.0
            for j in range(n):
                if abs(i - j) > 8:
                    far += c[layer][i][j]
            return far / (1 - c[layer][i][i])

        def far_mean(layer: int, i: int, n: int = n, c: list = c) -> float:
            return float(np.mean([c[layer][i][j] for j in range(n) if abs(i - j) > 8]))

        growth.append(np.mean([f(L, i) - f(1, i) for i in kept]))
        predicted = [far_mean(1, i) + (c[1][i][i] - c[L][i][i]) / (n - 1) for i in kept]
        excess.append(np.mean([far_mean(L, i) - p for i, p in zip(kept, predicted, strict=True)]))
    assert len(growth) >= 2  # the tiny corpus has sentences long enough to have far tokens
    e = study.context_locality(tiny_corpus, 10, 0, C11_WINDOWS).evidence
    assert e.far_share_growth.estimate == pytest.approx(float(np.mean(growth)), rel=1e-9, abs=1e-12)
    assert e.far_share_growth.n == len(growth)
    assert e.far_growth_minus_dilution.estimate == pytest.approx(float(np.mean(excess)), rel=1e-9, abs=1e-12)


def test_locality_is_the_chapters_one_sentence_computation(tiny_corpus):
    """The visible cell: one near and one far token's mean contribution at the last layer, over the word
    tokens that have a far input token, is the sentence's per-token mean the study averages."""
    r = tiny_corpus.results["a"][1]
    L = r.c.shape[0] - 1
    at = torch.arange(r.n_tokens)
    dist = (at[None, :] - at[:, None]).abs()
    near, far = (dist >= 1) & (dist <= 3), dist > 8
    words = ~torch.tensor(r.special)
    rows = words & far.any(-1)
    one_near = (r.c[L] * near).sum(-1) / near.sum(-1)
    one_far = (r.c[L] * far).sum(-1) / far.sum(-1).clamp(min=1)
    w = window_means([r], 3, 8)
    last = w[w.layer == L]
    assert int(rows.sum()) == len(last) > 0
    assert float(one_near[rows].mean()) == pytest.approx(last.near.mean())
    assert float(one_far[rows].mean()) == pytest.approx(last.far.mean())


def test_segment_crossing_on_pairs_and_single_sentences(tiny_lm, tiny_corpus):
    single = study.segment_crossing(tiny_corpus)
    assert single.cross_segment is None and single.pairs == 0 and single.record() == {"cross_segment": None}
    # uniform contributions: the other segment's share is its share of the tokens, at every layer
    n, special = 7, [True, False, False, True, False, False, True]
    pair = _result(torch.full((3, n, n), 1.0 / n, dtype=torch.float64), special)
    r = study.segment_crossing(_corpus([pair, pair]))
    assert r.pairs == 2 and r.cross_segment["layer"] == [1, 2]
    assert r.cross_segment["share"] == pytest.approx(r.cross_segment["uniform"])
    pairs = study.corpus_hta(tiny_lm, {"p": ["The cat sat. ||| It was warm."]}, "estimate", PROBES, 0, 64, False)
    real = study.segment_crossing(pairs)
    assert real.pairs == 1 and all(0 < s < 1 for s in real.cross_segment["share"])


def test_special_tokens_gap_is_per_sentence(tiny_lm, tiny_corpus):
    r = study.special_tokens(tiny_lm, tiny_corpus, seed=0)
    assert r.names == {"first": "[CLS]", "last": "[SEP]"}
    src = r.sources
    assert set(r.special_sources) == {"target", "layer", "source", "share", "token"}
    assert set(src.token) == {"[CLS]", "[SEP]"}
    assert src.groupby(["target", "layer"]).share.sum().to_numpy() == pytest.approx(1.0)
    table = tiny_corpus.tables["a"]
    last = table[table.layer == table.layer.max()]
    gaps = [g[g.special].own.mean() - g[~g.special].own.median() for _, g in last.groupby("sentence")]
    iv = r.special_minus_words
    assert iv.estimate == pytest.approx(np.mean(gaps)) and iv.n == 3 and iv.low <= iv.estimate <= iv.high
    # per special token: each one's own share minus its sentence's median word token
    per_token = [v - g[~g.special].own.median() for _, g in last.groupby("sentence") for v in g[g.special].own]
    by_tokens = r.special_minus_words_by_tokens
    assert by_tokens.estimate == pytest.approx(np.mean(per_token)) and by_tokens.n == len(per_token) == 6


def test_special_tokens_absent_or_in_one_sentence(tiny_lm):
    plain = _result(_own(5, [0.5, 0.4]))  # no special token at all
    none = study.special_tokens(tiny_lm, _corpus([plain, plain]), seed=0)
    assert (
        none.special_sources is None and none.special_minus_words is None and none.record() == {"special_sources": None}
    )
    # special tokens keep nothing of themselves, words all of it: the gap is -1 in every sentence
    c = _own(4, [1.0, 1.0])
    c[1:, 0] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    c[1:, -1] = torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    spec = _result(c, [True, False, False, True])
    two = study.special_tokens(tiny_lm, _corpus([spec, spec]), seed=0).special_minus_words
    assert (two.estimate, two.low, two.high, two.n) == (-1.0, -1.0, -1.0, 2)
    # one sentence: an estimate without an interval (too few to resample), not "no special tokens"
    one = study.special_tokens(tiny_lm, _corpus([spec]), seed=0)
    assert one.special_minus_words.estimate == -1.0 and not one.special_minus_words.has_interval
    assert one.special_minus_words.n == 1 and one.special_minus_words_by_tokens.n == 2


def test_parts_of_speech_content_minus_function():
    """Content words keep 0.8 of themselves, function words 0.2, in every sentence: the lead is 0.6."""
    n = 6
    tags = ["[CLS]", "NOUN", "DET", "VERB", "ADP", "[SEP]"]
    c = _own(n, [0.5, 0.5])
    for i, tag in enumerate(tags):
        own = 0.8 if tag in ("NOUN", "VERB") else 0.2 if tag in ("DET", "ADP") else 0.5
        c[2, i] = (1 - own) / (n - 1)
        c[2, i, i] = own
    results = [_result(c, [True, False, False, False, False, True]) for _ in range(3)]
    r = study.parts_of_speech(_corpus(results, [tags] * 3), seed=0)
    iv = r.content_minus_function
    assert iv.estimate == pytest.approx(0.6) and iv.low == pytest.approx(0.6) and iv.n == 3
    assert r.pos_own_median_last == pytest.approx(
        {"NOUN": 0.8, "VERB": 0.8, "DET": 0.2, "ADP": 0.2, "[CLS]": 0.5, "[SEP]": 0.5}
    )
    one = study.parts_of_speech(_corpus(results[:1], [tags]), seed=0).content_minus_function
    assert one.estimate == pytest.approx(0.6) and not one.has_interval  # one sentence: nothing to resample
    # without ADV (there is none here) the same; per token: pooled content minus pooled function words
    assert r.content_minus_function_no_adv.estimate == pytest.approx(0.6)
    assert (
        r.content_minus_function_by_tokens.estimate == pytest.approx(0.6) and r.content_minus_function_by_tokens.n == 12
    )


def test_parts_of_speech_without_adv_and_by_tokens_differ_where_they_should():
    """An ADV that keeps nothing pulls the content words' mean down only when ADV counts as content; a
    sentence with many content words weighs more per token than per sentence."""
    n = 6
    tags = ["[CLS]", "NOUN", "ADV", "DET", "ADP", "[SEP]"]
    own = {"NOUN": 0.9, "ADV": 0.1, "DET": 0.3, "ADP": 0.3}
    c = _own(n, [0.5, 0.5])
    for i, tag in enumerate(tags):
        a = own.get(tag, 0.5)
        c[2, i] = (1 - a) / (n - 1)
        c[2, i, i] = a
    results = [_result(c, [True, False, False, False, False, True]) for _ in range(3)]
    r = study.parts_of_speech(_corpus(results, [tags] * 3), seed=0)
    assert r.content_minus_function.estimate == pytest.approx((0.9 + 0.1) / 2 - 0.3)
    assert r.content_minus_function_no_adv.estimate == pytest.approx(0.9 - 0.3)


def test_parts_of_speech_on_the_tiny_model(tiny_corpus):
    r = study.parts_of_speech(tiny_corpus, seed=0)
    table = tiny_corpus.tables["a"]
    last = table[table.layer == table.layer.max()]
    assert set(r.pos_own_median_last) <= set(last.tag)
    assert set(r.table.layer) == set(table.layer)
    for tag, median in r.pos_own_median_last.items():
        assert median == pytest.approx(last[last.tag == tag].own.median(), abs=1e-4)


# --------------------------------------------------------------------------------------------------
# the sentences the page states come from the results: on either side of a finding they differ
# --------------------------------------------------------------------------------------------------


def test_own_share_text_follows_the_measured_trend():
    from identifiability.text import context_mixing as prose

    falls = study.own_share(_corpus([_result(_own(6, [0.4, 0.3, 0.2]))] * 2), seed=0)
    rises = study.own_share(_corpus([_result(_own(6, [0.8, 0.6, 0.7]))] * 2), seed=0)
    a, b = prose.own_share_text(falls, "syn"), prose.own_share_text(rises, "syn")
    assert "lower at every layer" in a and "mixing is strong" in a
    assert "rising again at layer 3" in b and "still mostly its own input" in b


def test_locality_text_follows_near_far_and_growth():
    from identifiability.text import context_mixing as prose

    def at_distance(weight) -> list[HTAResult]:
        out = []
        for n in (14, 16, 18):
            at = torch.arange(n, dtype=torch.float64)
            dist = (at[None, :] - at[:, None]).abs()
            c = torch.stack([torch.eye(n, dtype=torch.float64)] + [weight(layer, dist) for layer in (1, 2)])
            out.append(_result(c / c.sum(-1, keepdim=True)))
        return out

    local = study.context_locality(_corpus(at_distance(lambda k, d: torch.exp(-d / k))), 4, 0, C11_WINDOWS)
    distant = study.context_locality(_corpus(at_distance(lambda k, d: (1 + d) ** (3 - k))), 4, 0, C11_WINDOWS)
    a, b = prose.locality_text(local, "syn"), prose.locality_text(distant, "syn")
    assert "outweighs a far one in every layer" in a and "contribution grows" in a
    assert "in 0 of 2 layers" in b and "does not grow" in b
    short = study.context_locality(_corpus([_result(_own(6, [0.5, 0.4]))] * 2), 4, 0, C11_WINDOWS)
    assert "too short" in prose.locality_text(short, "syn")


def test_estimator_and_rank_texts_follow_the_measurements(tiny_lm, sentences, exact_run):
    from identifiability.text import context_mixing as prose

    typical = study.median_sample(Corpus("t", sentences), tiny_lm.tokenizer, 1, seed=0)
    at_length = study.exact_hta(tiny_lm, typical.texts, PROBES, seed=0, cache=False)
    e = study.estimator_error(exact_run, typical, at_length)
    text = prose.estimator_text(e, exact_run)
    assert f"{100 * e.estimator_error['median']:.1f}%" in text and "unbiased" not in text
    flipped = dataclasses.replace(
        e, estimator_error={**e.estimator_error, "signed_median": -e.estimator_error["signed_median"]}
    )
    assert ("runs high" in text) != ("runs high" in prose.estimator_text(flipped, exact_run))
    # effective ranks: an orthogonal block has rank d, a rank-one block 1
    d = 8
    low = torch.zeros(d, 3, d)
    low[:, 0] = torch.eye(d)  # the own block
    low[:, 1] = torch.outer(torch.ones(d), torch.ones(d))
    low[:, 2] = torch.outer(torch.arange(d, dtype=torch.float32), torch.ones(d))
    high = torch.eye(d).unsqueeze(1).expand(d, 3, d).clone()
    from identifiability.hta import block_ranks

    assert block_ranks(low).tolist() == pytest.approx([d, 1, 1]) and block_ranks(high).tolist() == pytest.approx(
        [d] * 3
    )
    a, b = prose.rank_text(block_ranks(low), 0, d, 16), prose.rank_text(block_ranks(high), 0, d, 16)
    assert "far below the 8 dimensions" in a and "close to the 8 dimensions" in b


def test_c10_texts_follow_the_verdict_and_the_sample():
    from identifiability.charts import context_mixing as charts
    from identifiability.evidence.context_mixing import C10Evidence
    from identifiability.text import context_mixing as prose
    from identifiability.verdicts.claims import rules
    from identifiability.verdicts.context_mixing import c10

    def verdict(x):
        e = C10Evidence(x, x, None, 0.05, 0.05, "a sample", x, 0.05)
        return e, c10(e, rules("C10"))

    inside, outside = verdict(Interval(0.7, 0.65, 0.75, 20)), verdict(Interval(0.4, 0.35, 0.45, 20))
    a, b = prose.band_text(inside[1]), prose.band_text(outside[1])
    assert "[0.55, 0.85]: holds" in a and "[0.55, 0.85]: fails" in b
    spec = charts.band_chart(*inside).to_dict()
    assert len(spec["layer"]) == 3  # the bands, the intervals, the estimates
    t = study.TypicalSample(28, [[6, 11], [12, 16], [17, 22], [23, 28]], [5, 5, 5, 5], 4, ["x"] * 20, [0] * 20)
    reused, fresh = prose.sample_text(t), prose.sample_text(dataclasses.replace(t, typical_reused=0))
    assert "4 of them are short exact sentences too" in reused and "short exact" not in fresh
    assert "5 of 6–11 tokens" in reused and "median sentence has 28 tokens" in reused


def test_special_and_pos_texts_follow_the_results(tiny_lm, tiny_corpus):
    from identifiability.text import context_mixing as prose

    special = study.special_tokens(tiny_lm, tiny_corpus, seed=0)
    assert "keeps" in prose.special_text(special, "tiny") and "[CLS]" in prose.special_text(special, "tiny")
    plain = _result(_own(5, [0.5, 0.4]))
    none = study.special_tokens(tiny_lm, _corpus([plain, plain]), seed=0)
    assert "adds no special tokens" in prose.special_text(none, "tiny")
    pos = study.parts_of_speech(tiny_corpus, seed=0)
    empty = dataclasses.replace(pos, pos_own_median_last={})
    assert prose.pos_text(pos) != prose.pos_text(empty) and "No part of speech" in prose.pos_text(empty)
