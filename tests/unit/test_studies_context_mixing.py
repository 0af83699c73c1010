"""Chapter 6's studies on a tiny random BERT and on synthetic attributions with known answers: what each
study records, the intervals it hands to the verdicts (their estimates, their units), and the theory behind
each quantity."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from identifiability.base.stats import Interval
from identifiability.corpus.corpora import Corpus
from identifiability.hta import (
    HTAResult,
    estimate_error,
    hidden_graph,
    layer_summary,
    locality,
    token_table,
    window_means,
)
from identifiability.recorded import proportional
from identifiability.recorded import store as recorded
from identifiability.recorded.proportional import sentence_row
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


def _recorded(results: list[HTAResult], draws: list[int] | None = None) -> recorded.Recorded:
    """The recorded run ``record-c10`` would write for ``results`` (corpus index k for results[k]) drawn as
    ``draws`` (default: each once)."""
    rows = {str(k): {"text": f"s{k}", **sentence_row(r)} for k, r in enumerate(results)}
    res = {
        "seed": 0,
        "draws": list(range(len(results))) if draws is None else draws,
        "sentences": rows,
        "eligible": {"max_tokens": 20, "covered": 0.9},
    }
    prov = {"date": "2026-12-03T10:00:00+00:00", "seconds": 7200.0, "target": "record-c10", "claims": ["C10"]}
    return recorded.Recorded("c10", "m/c", res, prov)


def _live(indices: list[int], lengths: list[int]) -> study.LiveSample:
    return study.LiveSample(len(indices), 8, 0, 20, 0.9, [f"s{i}" for i in indices], indices, lengths)


def _top(results: list[HTAResult], original: list[HTAResult], draws: list[int] | None = None, live=(0,)):
    """top_contributor on a recorded run of ``results``, its sentences ``live`` computed live."""
    rec = _recorded(results, draws)
    sample = _live(list(live), [results[i].n_tokens for i in live])
    return study.top_contributor(_corpus(results), rec, sample, [results[i] for i in live], original, 0, "make x")


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
        # C10's live sentences and its recorded sample (rule version 3), C11's per-token means (amended rules)
        "live_sentences", "live_from", "live_seed", "eligible_max_tokens", "eligible_covered", "c10_sample",
        "c10_shares", "c10_live",
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
    e = study.estimator_error(full, full)
    assert e.estimator_error["max"] < 1e-6 and e.estimator_error["top_agreement"] == 1.0
    assert abs(e.estimator_error["signed_median"]) < 1e-6
    assert e.estimator_effect_on_own_median < 1e-6 and e.estimator_effect_on_top_is_self_pct == 0
    assert e.estimator_probes_for_1pct <= 1


def test_estimator_error_by_length_and_the_probes_for_one_percent(tiny_lm, sentences, exact_run):
    """The error on the short exact sentences, and length by length on C10's live sentences (their exact HTA)."""
    live = study.token_sample(Corpus("t", sentences), tiny_lm.tokenizer, 3, seed=0, rec=None)
    at_length = study.exact_hta(tiny_lm, live.texts, PROBES, seed=0, cache=False)
    e = study.estimator_error(exact_run, at_length)
    err = e.estimator_error
    assert 0 < err["median"] <= err["p95"] <= err["max"] and abs(err["signed_median"]) <= err["median"]
    # the error falls like 1/sqrt(probes): the probes that bring the median to 1%
    assert e.estimator_probes_for_1pct == math.ceil(PROBES * (err["median"] / 0.01) ** 2)
    # one entry per length among the live sentences, measured on the sentences of that length alone
    bands = [f"{n} tokens" for n in sorted(set(live.lengths))]
    assert list(e.by_length) == bands and live.lengths == [r.n_tokens for r in at_length.exact]
    first = [k for k, n in enumerate(live.lengths) if n == min(live.lengths)]
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


def test_top_contributor_resamples_the_recorded_draws_not_tokens():
    """One sentence whose tokens all keep the top place and one where all lose it: the estimate is the mean
    of the per-sentence shares over the draws (a sentence drawn twice counts twice), its interval resamples
    the draws, not the tokens."""
    keep, lose = _result(_own(6, [0.5, 0.5])), _result(_own(6, [0.5, 0.1]))  # 0.1 < 0.9 / 5 spread to others
    r = _top([keep, lose], [keep])
    e = r.evidence
    assert e.share.estimate == 0.5 and e.share.n == 2 and e.share.unit == "drawn sentences"
    assert (e.share.low, e.share.high) == (0.0, 1.0)
    assert r.top_is_self_pct == {"syn": [100.0, 50.0]}
    assert r.lost_top_last_pct == {"syn": 50.0} and r.lost_top_max_pct == {"syn": 50.0}
    assert e.chance == pytest.approx(1 / 6) and e.not_run == ""
    # the original rule's sample is its own: here the sentence that keeps the top place
    assert e.original.estimate == 1.0 and not e.original.has_interval and e.original_chance == pytest.approx(1 / 6)
    thrice = _top([keep, lose], [keep], draws=[0, 0, 0, 1])
    assert thrice.evidence.share.estimate == 0.75 and thrice.c10_sample["sentences"] == 4
    assert thrice.c10_sample["distinct"] == 2 and thrice.c10_sample["hidden_tokens"] == 12
    assert thrice.evidence.sample.startswith(
        "exact HTA of 4 sentences drawn in proportion to their tokens (2 distinct, 12 hidden tokens) from the "
        "sentences of up to 20 tokens, which hold 90.0% of the corpus's hidden tokens; half-width "
    ) and thrice.evidence.sample.endswith(f"({thrice.caption})")


def test_top_contributor_reports_words_and_special_tokens_apart():
    """The special tokens (first and last) lose the top place, the words keep it: all hidden tokens 4 of 6,
    words 4 of 4, special tokens 0 of 2, each with its own chance 1/d_s."""
    c = _own(6, [0.5, 0.5])
    for i in (0, 5):  # the special tokens keep 0.1 and give 0.5 to their neighbour
        c[2, i] = 0.4 / 4
        c[2, i, i], c[2, i, 1 if i == 0 else 4] = 0.1, 0.5
    sentence = _result(c, [True, False, False, False, False, True])
    r = _top([sentence] * 3, [sentence])
    e = r.evidence
    assert (e.share.estimate, e.words.estimate, e.special.estimate) == pytest.approx((4 / 6, 1.0, 0.0))
    assert e.word_chance == pytest.approx(1 / 6) and e.share.n == e.words.n == e.special.n == 3
    assert r.c10_shares["special"] == [0.0, 0.0, 0.0]
    plain = _result(_own(6, [0.5, 0.5]))
    none = _top([plain] * 2, [plain])
    assert none.evidence.special is None and none.c10_shares["special"] is None


def test_without_a_recorded_run_the_evidence_says_so_and_the_live_sentences_are_not_evidence():
    keep = _result(_own(6, [0.5, 0.5]))
    r = study.top_contributor(_corpus([keep]), None, _live([0], [6]), [keep], [keep], 0, "make record-c10")
    e = r.evidence
    assert e.share is None and e.words is None and e.not_run == "make record-c10"
    assert "`make record-c10` computes it" in e.sample and r.c10_sample is None and r.c10_shares is None
    assert r.c10_live == {"share": [1.0], "recorded": [None]} and e.original.estimate == 1.0


def test_token_sample_takes_the_recorded_runs_seed_and_first_draws():
    corpus = Corpus("w", [" ".join(f"w{n}x{i}" for i in range(n)) for n in range(3, 40)])
    lengths = [len(x.split()) for x in corpus.sentences]
    pool = proportional.eligible(lengths)
    t = study.token_sample(corpus, None, 3, seed=5, rec=None)
    first = proportional.draw(pool, 8, 5)  # the shortest 3 distinct ones of the first 8 draws
    assert t.indices == sorted(set(first), key=lambda i: (lengths[i], first.index(i)))[:3] and t.live_seed == 5
    assert t.texts == [corpus.sentences[i] for i in t.indices] and t.lengths == sorted(t.lengths)
    assert t.lengths == [lengths[i] for i in t.indices] and t.live_from == 8
    assert (t.eligible_max_tokens, t.eligible_covered) == (pool.max_tokens, pool.covered)
    rec = recorded.Recorded("c10", "k", {"seed": 7}, {})
    with_rec = study.token_sample(corpus, None, 2, seed=5, rec=rec)
    assert set(with_rec.indices) <= set(proportional.draw(pool, 8, 7)) and with_rec.live_seed == 7
    assert study.token_sample(corpus, None, 12, seed=5, rec=None).live_from == 12


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

    at_length = study.exact_hta(tiny_lm, sentences[:1], PROBES, seed=0, cache=False)
    e = study.estimator_error(exact_run, at_length)
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
    t = study.LiveSample(2, 8, 0, 49, 0.907, ["x", "y"], [3, 8], [17, 31])
    assert "the 2 shortest of its first 8 draws (seed 0), of 17 tokens, 31 tokens" in prose.sample_text(t)


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
