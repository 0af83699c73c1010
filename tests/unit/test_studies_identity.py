"""Chapter 4's studies (token identity) on tiny random models: what each section records, the intervals the
verdicts take, and what holds by construction whatever the weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from identifiability import identity as ident
from identifiability import schema
from identifiability.corpora import load_corpus, sample_sentences
from identifiability.stats import grouped_ci
from identifiability.studies import identity as study
from identifiability.verdicts import INCONCLUSIVE, judge_c6

FAST = dict(epochs=3, batch_size=256, mlp_hidden=32, patience=2, seed=0)


@pytest.fixture(scope="module")
def texts(tiny_lm):
    return sample_sentences(load_corpus("lee"), 40, seed=0, tokenizer=tiny_lm.tokenizer, min_tokens=6, max_tokens=40)


@pytest.fixture(scope="module")
def sample(tiny_lm, texts, module_data_folder):
    return study.hidden_sample(tiny_lm, texts, "lee", max_tokens=40, seed=0, include_special=False)


@pytest.fixture(scope="module")
def probes(sample):
    return study.trained_probes(sample, **FAST)


@pytest.fixture(scope="module")
def rates(sample, probes):
    return study.identification(sample, probes)


@pytest.fixture(scope="module")
def claims(sample, probes):
    return study.identity_claims(sample, probes, epochs=3, batch_size=256, patience=2, seed=0)


def _is_nan_or_within(est: float, low: float, high: float) -> bool:
    return (math.isnan(low) and math.isnan(high)) or low - 1e-12 <= est <= high + 1e-12


# --- hidden states and the split ----------------------------------------------------------------------------


def test_sample_splits_by_sentence_and_leaves_special_tokens_out(tiny_lm, texts, sample):
    hs = sample.hs
    assert sample.n_sentences_used == len(texts) == sum(v["sentences"] for v in sample.split_sizes.values())
    assert sample.n_tokens_all == hs.n_tokens and sample.n_layers == tiny_lm.n_layers == hs.n_layers
    assert sample.split_sentence_overlap == 0 and not sample.causal
    assert torch.equal(hs.hidden[0], hs.x)  # e^0 = x
    kept = sum(v["tokens"] for v in sample.split_sizes.values())
    assert kept == hs.n_tokens - int(hs.special.sum()) and int(hs.special.sum()) == 2 * len(texts)
    with_special = study.hidden_sample(tiny_lm, texts, "lee", max_tokens=40, seed=0, include_special=True)
    assert sum(v["tokens"] for v in with_special.split_sizes.values()) == hs.n_tokens
    assert with_special.key != sample.key  # probes trained with special tokens are cached apart


# --- training -----------------------------------------------------------------------------------------------


def test_probes_one_per_layer_and_loss_and_read_back_from_the_cache(sample, probes):
    L = sample.n_layers
    t = probes.training
    assert len(t["layer"]) == 2 * 2 * (L + 1)  # linear and mlp, two losses, L+1 layers (naive is not trained)
    assert set(zip(t["mapping"], t["loss"])) == {(m, lo) for m in ("linear", "mlp") for lo in ident.LOSSES}
    assert all(1 <= b <= s <= FAST["epochs"] for b, s in zip(t["best epoch"], t["epochs run"]))
    assert list(probes.overview.probes) == [L + 1] * 4
    again = study.trained_probes(sample, **FAST)
    assert again.probes["linear"].history.get("cached")
    assert torch.equal(again.probes["linear"].probe.w, probes.probes["linear"].probe.w)


# --- identification per layer -------------------------------------------------------------------------------


def test_the_identity_map_finds_every_token_at_layer_0(rates):
    assert rates.naive_layer0 == [1.0, 1.0, 1.0, 1.0]  # x is nearest to itself, whatever the weights
    assert rates.rates_sentence["naive"]["none"]["cos"][0] == 1.0
    first = rates.naive_cos_first_layer_below_99
    curve = rates.rates_sentence["naive"]["none"]["cos"]
    assert all(r >= 0.99 for r in curve[: first if first is not None else None])
    assert first is None or curve[first] < 0.99


def test_identification_chance_and_last_layer_summaries(sample, rates):
    test, L = sample.splits["test"], sample.n_layers
    # chance: mean over test tokens of one over the tokens of their sentence
    per_sentence = torch.bincount(test.sentence)[test.sentence].double()
    assert rates.chance_sentence == pytest.approx(float((1 / per_sentence).mean()))
    assert rates.chance_all < rates.chance_sentence
    assert rates.linear_cos_cos_last == pytest.approx(rates.rates_sentence["linear"]["cos"]["cos"][L], abs=5e-5)
    assert rates.linear_cos_cos_last_all == pytest.approx(rates.rates_all["linear"]["cos"]["cos"][L], abs=5e-5)
    # the best last-layer combination is the largest same-sentence rate of the last-layer table
    assert rates.best_last["rate"] == pytest.approx(rates.last_layer["sentence"].to_numpy().max())
    # the gap is train minus test, per trained probe, lookup and layer
    gaps = [
        a - b
        for m in ("linear", "mlp")
        for lo in ident.LOSSES
        for lk in ident.LOOKUPS
        for a, b in zip(rates.rates_train[m][lo][lk], rates.rates_sentence[m][lo][lk])
    ]
    assert rates.max_train_test_gap == pytest.approx(max(gaps), abs=1e-4)
    assert rates.mean_train_test_gap == pytest.approx(np.mean(gaps), abs=1e-4)


def test_a_rate_is_the_share_of_test_tokens_whose_nearest_candidate_is_their_own(sample, probes, rates):
    test, L = sample.splits["test"], sample.n_layers
    lin = probes.probes["linear"]
    q = lin.probe.forward_one(list(zip(lin.layers, lin.losses)).index((L, "cos")), test.inputs[L])
    hits = []
    for s in torch.unique(test.sentence):
        m = test.sentence == s
        cos = torch.nn.functional.cosine_similarity(q[m, None], test.targets[None, m], dim=-1)
        hits.append(cos.argmax(1) == torch.arange(int(m.sum())))
    assert rates.linear_cos_cos_last == pytest.approx(float(torch.cat(hits).double().mean()))


# --- the evidence of C6 and C7 ------------------------------------------------------------------------------


def test_claim_intervals_contain_their_estimates_and_resample_test_sentences(sample, probes, rates, claims):
    test, L = sample.splits["test"], sample.n_layers
    n_test_sentences = int(torch.unique(test.sentence).numel())
    for iv in (claims.last_rate, claims.naive_drop):
        assert iv.n == n_test_sentences and iv.has_interval
        assert iv.low <= iv.estimate <= iv.high
    # C6 averages the seeds token by token, which is the mean of the seeds' rates; the first seed is the probe
    # of the per-layer curve
    assert len(claims.c6_seed_rates) == 3
    assert claims.last_rate.estimate == pytest.approx(np.mean(claims.c6_seed_rates))
    assert claims.linear_cos_cos_by_layer[L] == pytest.approx(claims.c6_seed_rates[0])
    assert claims.linear_cos_cos_by_layer[L] == pytest.approx(rates.linear_cos_cos_last)
    # C7: the identity map's rate at layer L minus at layer 1
    naive = rates.rates_sentence["naive"]["none"]["cos"]
    assert claims.naive_drop.estimate == pytest.approx(naive[L] - naive[1], abs=1e-4)
    for est, (lo, hi) in zip(claims.linear_cos_cos_by_layer, claims.linear_cos_cos_ci95_by_layer):
        assert _is_nan_or_within(est, lo, hi)
    # the interval resamples sentences: the probe's per-sentence groups give it back
    groups = ident.correct_by_sentence(probes.probes["linear"], test, L)
    assert len(groups) == n_test_sentences
    assert grouped_ci(groups, np.mean, seed=0) == pytest.approx(
        (claims.linear_cos_cos_by_layer[L], *claims.linear_cos_cos_ci95_by_layer[L])
    )


def test_unseen_word_types_are_the_test_tokens_no_training_sentence_holds(sample, claims):
    test, train = sample.splits["test"], sample.splits["train"]
    seen = set(train.token_id.tolist())
    unseen = [t not in seen for t in test.token_id.tolist()]
    assert claims.c6_unseen_tokens == sum(unseen) > 0
    sentences = {int(s) for s, u in zip(test.sentence, unseen) if u}
    assert claims.unseen.n == len(sentences)
    assert claims.c6_unseen_types_rate == claims.unseen.estimate
    assert _is_nan_or_within(claims.c6_unseen_types_rate, *claims.c6_unseen_types_ci95)


def test_one_test_sentence_gives_no_interval_and_an_inconclusive_verdict(tiny_lm, sentences, module_data_folder):
    one = study.hidden_sample(tiny_lm, sentences, "three", max_tokens=40, seed=0, include_special=False)
    pr = study.trained_probes(one, **FAST)
    c = study.identity_claims(one, pr, epochs=2, batch_size=256, patience=2, seed=0, more_seeds=(1,))
    assert c.last_rate.n == 1 and not c.last_rate.has_interval and math.isfinite(c.last_rate.estimate)
    assert math.isnan(c.naive_drop.low) and math.isnan(c.naive_drop.high)
    assert len(c.c6_seed_rates) == 2
    assert judge_c6(c.last_rate, c.c6_shuffled_rate, "rule").verdict == INCONCLUSIVE


# --- generalisation and neighbours --------------------------------------------------------------------------


def test_generalisation_rows_are_the_trained_layer_and_the_diagonal_is_the_rate(sample, probes, rates):
    g = study.generalisation(sample, probes)
    test, L = sample.splits["test"], sample.n_layers
    assert g.matrix.shape == (L + 1, L + 1)
    assert np.diag(g.matrix) == pytest.approx(rates.rates_sentence["linear"]["cos"]["cos"], abs=5e-5)
    # the last layer's probe applied to x (row L, column 0), not the layer-0 probe applied to e^L
    rows = ident.predict(probes.probes["linear"], test, layer=L, input_layer=0)
    assert g.gen_linear_cos_last_on_first == pytest.approx(float((test.key[rows] == test.key).double().mean()))
    off = g.matrix[~np.eye(L + 1, dtype=bool)]
    assert g.gen_linear_cos_offdiag_mean == pytest.approx(off.mean())
    assert g.generalisation["linear"]["cos"]["cos"][str(L)] == pytest.approx(list(g.matrix[L]), abs=5e-5)


def test_neighbour_shares_and_their_baselines(sample, probes, rates):
    nr = study.neighbours(sample, probes, rates)
    test, L = sample.splits["test"], sample.n_layers
    shares = nr.neighbours["linear"]["cos"]["cos"]
    assert shares["0"] == rates.rates_sentence["linear"]["cos"]["cos"]
    assert nr.linear_cos_last_miss == pytest.approx(1 - rates.linear_cos_cos_last)
    # misses by offset are shares of the misses; the uniform baseline is 1/(d_s - 1) per existing neighbour
    assert sum(nr.linear_cos_last_misses_by_offset.values()) <= 1 + 1e-9
    d_s = torch.bincount(test.sentence)[test.sentence].double()
    tokens = set(zip(test.sentence.tolist(), test.position.tolist()))
    has_right = torch.tensor([(s, p + 1) in tokens for s, p in zip(test.sentence.tolist(), test.position.tolist())])
    assert nr.uniform_misses_by_offset[1] == pytest.approx(float((has_right / (d_s - 1)).mean()))
    # the identity map at layer 0 lands on its own token only
    naive = nr.neighbours["naive"]["none"]["cos"]
    assert naive["0"][0] == 1.0 and all(naive[k][0] == 0.0 for k in naive if k != "0")
    rows = ident.predict(probes.probes["linear"], test, layer=L)
    missed = test.key[rows] != test.key
    same = int((missed & (test.token_id[rows] == test.token_id)).sum())
    assert nr.linear_cos_last_miss_same_word == pytest.approx(same / max(1, int(missed.sum())))
    assert 0 <= nr.position_only_adjacent <= 1


# --- a second corpus ----------------------------------------------------------------------------------------


def test_second_corpus_trains_its_own_probes_and_transfers_the_first(tiny_lm, probes, rates, module_data_folder):
    texts2 = sample_sentences(
        load_corpus("polarity"), 20, seed=0, tokenizer=tiny_lm.tokenizer, min_tokens=6, max_tokens=40
    )
    sc = study.second_corpus(
        tiny_lm, texts2, "polarity", probes, rates, "lee", max_tokens=40, include_special=False, **FAST
    )
    assert sc.second_corpus_name == "polarity" and sc.second_sentences == 20
    # the identity map learns nothing, so its rates do not depend on which corpus trained the probes
    assert sc.second_transfer_rates["naive"] == sc.second_rates["naive"]
    assert set(sc.overlay.series) == {"lee", "polarity", "polarity, probes trained on lee"}
    assert "naive" not in set(sc.overlay[sc.overlay.series.str.contains("trained on")].mapping)
    assert 0 < sc.second_chance < 1


# --- what the chapter records --------------------------------------------------------------------------------


def test_the_recorded_fields_are_the_chapters_schema(sample, probes, rates, claims):
    recorded = {**sample.record(), **probes.record(), **rates.record(), **claims.record()}
    schema.check("04_token_identity", recorded)
    assert not {"hs", "splits", "probes", "rates", "last_rate", "naive_drop"} & set(recorded)


def test_every_architecture_runs_the_first_sections(tiny_any, module_data_folder):
    texts = sample_sentences(load_corpus("lee"), 12, seed=0, tokenizer=tiny_any.tokenizer, min_tokens=6, max_tokens=30)
    s = study.hidden_sample(tiny_any, texts, "lee", max_tokens=30, seed=0, include_special=False)
    pr = study.trained_probes(s, epochs=1, batch_size=256, mlp_hidden=16, patience=1, seed=0)
    r = study.identification(s, pr)
    assert s.causal == bool(tiny_any.adapter.causal)
    assert r.naive_layer0 == [1.0, 1.0, 1.0, 1.0]
    assert len(r.rates_sentence["linear"]["cos"]["cos"]) == tiny_any.n_layers + 1
