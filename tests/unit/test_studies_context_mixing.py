"""Chapter 6's studies on a tiny random BERT and on synthetic attributions with known answers: what each
study records, the intervals it hands to the verdicts (their estimates, their units), and the theory behind
each quantity."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from identifiability.hta import HTAResult, hidden_graph, layer_summary, locality, token_table
from identifiability.studies import context_mixing as study
from identifiability.studies import schema_of

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
    e = study.estimator_error(tiny_lm, full, [], tiny_lm.d_model, seed=0, cache=False)
    assert e.estimator_error["max"] < 1e-6 and e.estimator_error["top_agreement"] == 1.0
    assert e.estimator_effect_on_own_median < 1e-6 and e.estimator_effect_on_top_is_self_pct == 0
    assert e.estimator_probes_for_1pct <= 1


def test_estimator_error_by_length_and_the_probes_for_one_percent(tiny_lm, sentences, exact_run):
    e = study.estimator_error(tiny_lm, exact_run, sentences[2:], PROBES, seed=0, cache=False)
    err = e.estimator_error
    assert 0 < err["median"] <= err["p95"] <= err["max"]
    # the error falls like 1/sqrt(probes): the probes that bring the median to 1%
    assert e.estimator_probes_for_1pct == math.ceil(PROBES * (err["median"] / 0.01) ** 2)
    assert len(e.by_length) == 2 and e.by_length[next(iter(e.by_length))] == err  # the exact sentences' band first
    n_long = len(tiny_lm.tokenizer(sentences[2])["input_ids"])
    assert f"{n_long}-{n_long} tokens" in e.by_length
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


def test_own_share_steps_and_drop_over_sentences():
    """Three sentences whose own share falls 0.2 per layer (and differs by sentence): each step is -0.2."""
    results = [_result(_own(n, [0.9 - k * 0.01, 0.7 - k * 0.01, 0.5 - k * 0.01])) for k, n in enumerate((5, 6, 7))]
    r = study.own_share(_corpus(results), seed=0)
    assert [s.estimate for s in r.steps] == pytest.approx([-0.2, -0.2])
    assert r.last_minus_first.estimate == pytest.approx(-0.4)
    assert all(s.n == 3 and s.low <= s.estimate <= s.high for s in [*r.steps, r.last_minus_first])
    assert r.own_monotone == {"syn": True} and r.rises == []
    assert r.own_median_first == pytest.approx(0.89) and r.own_median_last == pytest.approx(0.49)
    assert r.uniform == pytest.approx(np.mean([1 / n for n in (5, 6, 7) for _ in range(n)]))


def test_own_share_finds_a_rise_and_has_no_interval_from_one_sentence():
    rising = study.own_share(_corpus([_result(_own(5, [0.8, 0.6, 0.7]))]), seed=0)
    assert rising.own_monotone == {"syn": False} and rising.rises == [3]
    assert rising.steps[1].estimate == pytest.approx(0.1)
    assert all(not s.has_interval and s.n == 1 for s in [*rising.steps, rising.last_minus_first])


def test_top_contributor_resamples_sentences_not_tokens():
    """One sentence whose tokens all keep the top place and one where all lose it: resampling the two
    sentences gives 0 to 1; resampling their 12 tokens would give a narrow interval around 0.5."""
    keep, lose = _result(_own(6, [0.5, 0.5])), _result(_own(6, [0.5, 0.1]))  # 0.1 < 0.9 / 5 spread to others
    r = study.top_contributor(_corpus([keep, lose]), [keep, lose], seed=0)
    assert r.top_is_self_last.estimate == 0.5 and r.top_is_self_last.n == 2
    assert (r.top_is_self_last.low, r.top_is_self_last.high) == (0.0, 1.0)
    assert r.top_is_self_pct == {"syn": [100.0, 50.0]}
    assert r.lost_top_last_pct == {"syn": 50.0} and r.lost_top_max_pct == {"syn": 50.0}
    assert r.chance == pytest.approx(1 / 6)
    one = study.top_contributor(_corpus([keep]), [keep], seed=0)
    assert one.top_is_self_last.estimate == 1.0 and not one.top_is_self_last.has_interval


def _neighbours_then_uniform(n: int) -> torch.Tensor:
    """(3, n, n): layer 1 keeps half and takes the rest from the next token (the previous one for the last),
    layer 2 keeps half and spreads the rest evenly."""
    eye = torch.eye(n, dtype=torch.float64)
    nxt = torch.diag(torch.ones(n - 1, dtype=torch.float64), 1)
    nxt[-1, -2] = 1.0
    return torch.stack([eye, 0.5 * eye + 0.5 * nxt, 0.5 * eye + 0.5 / (n - 1) * (1 - eye)])


def test_locality_near_far_and_growth_on_known_contributions():
    results = [_result(_neighbours_then_uniform(n)) for n in (14, 16, 18)]
    loc = study.context_locality(_corpus(results), max_offset=10, seed=0)
    t = loc.tables["syn"]
    assert list(t.within_3) == pytest.approx([1.0, t.uniform_within_3.iloc[0]])  # neighbours, then uniform
    assert list(t.beyond_8) == pytest.approx([0.0, t.uniform_beyond_8.iloc[0]])
    assert loc.near_minus_far[0].estimate == pytest.approx(1.0)
    # long-range context grows from none to the uniform share: per sentence, then averaged
    per = [locality([r]).beyond_8.iloc[-1] for r in results]
    assert loc.far_last_minus_first.estimate == pytest.approx(np.mean(per)) and loc.far_last_minus_first.low > 0
    assert all(iv.n == 3 for iv in [*loc.near_minus_far, loc.far_last_minus_first])
    assert loc.position_only == pytest.approx(t.uniform_beyond_8.iloc[0])
    assert loc.locality["syn"]["within_3"] == pytest.approx(list(t.within_3), abs=1e-5)
    assert set(loc.profile.offset) == set(range(-11, 12))


def test_locality_is_the_chapters_one_sentence_computation(tiny_corpus):
    """The visible cell: context shares by |j - i| at the last layer, averaged over word tokens."""
    r = tiny_corpus.results["a"][1]
    L = r.c.shape[0] - 1
    at = torch.arange(r.n_tokens)
    dist = (at[None, :] - at[:, None]).abs()
    context = r.c[L] * (dist > 0)
    context = context / context.sum(-1, keepdim=True)
    near = (context * (dist <= 3)).sum(-1)
    words = ~torch.tensor(r.special)
    loc = study.context_locality(tiny_corpus, max_offset=4, seed=0)
    assert float(near[words].mean()) == pytest.approx(locality([r]).within_3.iloc[-1])
    assert loc.tables["a"].within_3.iloc[-1] == pytest.approx(locality(tiny_corpus.results["a"]).within_3.iloc[-1])


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
    assert study.special_tokens(tiny_lm, _corpus([spec]), seed=0).special_minus_words is None


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
    assert study.parts_of_speech(_corpus(results[:1], [tags]), seed=0).content_minus_function is None


def test_parts_of_speech_on_the_tiny_model(tiny_corpus):
    r = study.parts_of_speech(tiny_corpus, seed=0)
    table = tiny_corpus.tables["a"]
    last = table[table.layer == table.layer.max()]
    assert set(r.pos_own_median_last) <= set(last.tag)
    assert set(r.table.layer) == set(table.layer)
    for tag, median in r.pos_own_median_last.items():
        assert median == pytest.approx(last[last.tag == tag].own.median(), abs=1e-4)
