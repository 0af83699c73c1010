"""The angle-versus-magnitude studies (chapter 5) on tiny random models: what each records, the intervals C8
is judged on, and the geometry every result must obey whatever the weights (e^0 = x, a cosine ignores lengths,
the own x_i closest in angle is the identity map's cosine rate)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from identifiability import identity as ident
from identifiability.base.stats import hierarchical_ci
from identifiability.corpus.corpora import load_corpus, sample_sentences
from identifiability.studies import angle_magnitude as study
from identifiability.studies import token_identity as token
from identifiability.text import angle_magnitude as prose
from identifiability.verdicts import INCONCLUSIVE, Rules
from identifiability.verdicts.angle_magnitude import c8 as judge

FAST = dict(epochs=3, batch_size=256, mlp_hidden=16, patience=2)


@pytest.fixture(scope="module")
def texts(tiny_lm):
    # 24 sentences: 4 test sentences, enough for intervals that resample sentences
    return sample_sentences(load_corpus("lee"), 24, seed=0, tokenizer=tiny_lm.tokenizer, min_tokens=6, max_tokens=40)


@pytest.fixture(scope="module")
def sample(tiny_lm, texts, module_data_folder):
    return study.probe_sample(tiny_lm, texts, "lee", 40, seed=0, **FAST)


@pytest.fixture(scope="module")
def cos_l2(sample):
    return study.cosine_vs_l2(sample)


@pytest.fixture(scope="module")
def abl(sample):
    return study.ablations(sample, rescale_max=4.0)


@pytest.fixture(scope="module")
def na(sample):
    return study.norms_and_angles(sample, hist_bins=10)


@pytest.fixture(scope="module")
def c8(sample, abl):
    return study.c8_evidence(sample, abl)


def test_probe_sample_records_the_sample_and_reads_its_probes_back_from_the_cache(tiny_lm, texts, sample):
    assert sample.record() == {
        "n_sentences_used": len(texts),
        "test_tokens": sample.splits["test"].n,
        "n_layers": tiny_lm.n_layers,
        "probes_from_cache": False,
    }
    assert set(sample.probes) == {"naive", "linear"}
    assert torch.equal(sample.hs.hidden[0], sample.hs.x)  # e^0 = x
    test_sentences = set(sample.splits["test"].sentence.tolist())
    assert not test_sentences & set(sample.splits["train"].sentence.tolist())
    again = study.probe_sample(tiny_lm, texts, "lee", 40, seed=0, **FAST)
    assert again.probes_from_cache
    first, second = sample.probes["linear"].probe.state_dict(), again.probes["linear"].probe.state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_cosine_vs_l2_rates_and_their_summaries(sample, cos_l2):
    L = sample.n_layers
    for k in ("linear_cos_cos", "linear_l2_l2", "naive_cos", "naive_l2"):
        assert len(getattr(cos_l2, k)) == L + 1
    # e^0 = x: the nearest input embedding of x_i among its sentence's x_j is x_i itself, with either distance
    assert cos_l2.naive_cos[0] == 1.0 and cos_l2.naive_l2[0] == 1.0
    # chance is the mean over test tokens of 1/d_s (d_s: the sentence's tokens in the split)
    test = sample.splits["test"]
    d_s = torch.bincount(test.sentence)[test.sentence].double()
    assert cos_l2.chance == pytest.approx(float((1 / d_s).mean()))
    # the rate at layer L is the share of tokens that ident.predict takes for themselves
    rows = ident.predict(sample.probes["linear"], test, L, "cos", "cos")
    assert cos_l2.linear_cos_cos[-1] == pytest.approx(float((test.key[rows] == test.key).double().mean()))
    cos, l2 = np.array(cos_l2.linear_cos_cos), np.array(cos_l2.linear_l2_l2)
    assert cos_l2.cos_beats_l2_layers_linear == int((cos > l2).sum()) <= cos_l2.cos_at_least_l2_layers_linear
    assert cos_l2.cos_minus_l2_linear_mean == pytest.approx(float((cos - l2).mean()))
    assert cos_l2.rates["linear"]["cos"]["cos"] == [round(v, 4) for v in cos_l2.linear_cos_cos]
    assert len(cos_l2.table) == (L + 1) * 2 * 2 + (L + 1) * 2  # linear: layer x loss x lookup; identity: x lookup


def test_ablations_keep_the_original_rows_and_a_cosine_ignores_lengths(sample, cos_l2, abl):
    L = sample.n_layers
    assert len(abl.ablation_labels) == 6 and set(abl.ablations) == set(abl.ablation_labels)
    # the original rows are the probes of cosine_vs_l2, evaluated on the same test tokens
    assert abl.last_layer.loc["cos / cos", "original (linear)"] == pytest.approx(cos_l2.linear_cos_cos[-1])
    assert abl.unit_minus_original_last == pytest.approx(abl.unit_linear_cos_cos[-1] - cos_l2.linear_cos_cos[-1])
    # the identity map with cosine lookup cannot change under a positive rescaling of e_i^l
    assert abl.rescaled_naive_cos == cos_l2.naive_cos and abl.rescale_naive_cos_max_change == 0
    # the best magnitude-only MLP per layer is the largest of its four loss x lookup curves
    curves = [study.ablation_curve(abl.table, "magnitude only", "mlp", lo, lk) for lo, lk in study.COMBOS]
    assert abl.norm_only_best == np.max(curves, axis=0).tolist()
    assert abl.norm_only_best_max == max(abl.norm_only_best)
    assert abl.norm_only_best[abl.norm_only_best_max_layer] == abl.norm_only_best_max
    best = abl.best_norm_probe(L)
    assert study.ablation_curve(abl.table, "magnitude only", "mlp", *best)[L] == abl.norm_only_best[L]


def test_rescaling_by_one_changes_nothing(sample, cos_l2):
    """Factors drawn from [1/1, 1] are all 1: every rescaled rate is the original one (the unit and norm probes
    come back from the cache)."""
    same = study.ablations(sample, rescale_max=1.0)
    assert same.rescaled_linear_cos_cos == cos_l2.linear_cos_cos
    assert same.rescaled_naive_l2 == cos_l2.naive_l2
    assert same.rescale_drop_linear_l2_last == 0 and same.rescale_drop_naive_l2_mean == 0


def test_norms_and_angles_per_layer(sample, cos_l2, na):
    L = sample.n_layers
    test = sample.splits["test"]
    assert len(na.norm_median) == len(na.angle_median) == L + 1
    norms = test.raw.norm(dim=-1).double().numpy()  # (L+1, n)
    assert na.norm_median == pytest.approx(np.median(norms, axis=1), abs=1e-4)
    assert na.norm_spread_last == pytest.approx(np.quantile(norms[-1], 0.95) / np.quantile(norms[-1], 0.05))
    # e^0 = x: no angle at the input, and the own x_i is the closest direction
    assert na.angle_median[0] < 0.1 and na.closest_share[0] == 1.0
    # the own x_i is the angularly closest exactly when the identity map's cosine lookup identifies the token
    assert na.closest_share == pytest.approx(cos_l2.naive_cos, abs=1e-4)
    assert all(0 <= a <= 180 for a in na.angle_median + na.angle_other_mean)
    assert 0 <= na.angle_increasing_layers <= L
    shares = na.histograms.groupby("layer").share.sum()
    assert np.allclose(shares, 1.0) and na.histograms.layer.nunique() == L + 1


def test_c8_intervals_resample_seeds_and_sentences_and_contain_their_estimates(sample, abl, c8):
    L = sample.n_layers
    test = sample.splits["test"]
    n_sentences = test.sentence.unique().numel()
    assert set(c8.rates) == {"raw", "unit", "norm", "unit+norm"} and c8.c8_seeds == [0, 1, 2]
    sizes = np.array([len(o) for o in ident.correct_by_sentence(sample.probes["naive"], test, L)])
    for rates in c8.rates.values():
        assert rates.shape == (3, n_sentences)  # probe seeds x test sentences
        counts = rates * sizes  # a share of each sentence's tokens
        assert np.allclose(counts, np.round(counts)) and rates.min() >= 0 and rates.max() <= 1
    # the raw probe of seed 0 is the sample's own linear probe
    first = [o.mean() for o in ident.correct_by_sentence(sample.probes["linear"], test, L)]
    assert c8.rates["raw"][0] == pytest.approx(first)
    e = c8.evidence
    for iv in (e.unit_minus_raw, e.norm_vs_chance, e.norm_adds, e.unit_minus_raw_seed0):
        assert iv.n == n_sentences  # the unit resampled is a sentence, not a token
        assert iv.low - 1e-12 <= iv.estimate <= iv.high + 1e-12
    raw, unit, norm, both = (c8.rates[k] for k in ("raw", "unit", "norm", "unit+norm"))
    assert e.unit_minus_raw.estimate == pytest.approx((unit - raw).mean())
    assert e.norm_vs_chance.estimate == pytest.approx((norm - 1 / sizes).mean())
    assert (e.norm_adds.low, e.norm_adds.high) == hierarchical_ci(both - unit, 1, seed=sample.seed)[1:]
    assert e.norm_adds_seed0.estimate == pytest.approx((both - unit)[0].mean())
    assert c8.c8_seed_rates["unit"] == pytest.approx(unit.mean(1))
    assert c8.c8_best_norm_probe == list(abl.best_norm_probe(L))
    last = test.raw[L].norm(dim=-1).double().numpy()
    q25, median, q75 = np.quantile(last, [0.25, 0.5, 0.75])
    assert c8.c8_norm_spread_last == pytest.approx((q75 - q25) / median, abs=1e-6) == e.norm_spread
    assert c8.c8_unit_norm_rate_last == pytest.approx(both.mean())


def test_chapter_5_reads_the_extra_seeds_chapter_4_trained(tiny_lm, texts, module_data_folder):
    """Chapter 4 trains the linear cosine probes of seeds 1 and 2 for every layer (identity_claims); chapter 5,
    with the same parameters, asks for the same probes in c8_evidence and must read them from the cache."""
    s4 = token.hidden_sample(tiny_lm, texts, "lee-seeds", max_tokens=40, seed=0, include_special=False)
    pr = token.trained_probes(s4, **FAST, seed=0)
    fresh = token.identity_claims(s4, pr, **FAST, seed=0)
    assert len(fresh.seed_training["layer"]) == 2 * (tiny_lm.n_layers + 1)  # two seeds, every layer, cosine
    s5 = study.probe_sample(tiny_lm, texts, "lee-seeds", 40, seed=0, **FAST)
    assert s5.probes_from_cache
    config = ident.probe_config("linear", **s5.training, seed=s5.seed)
    again = ident.seeded_probes(s5.splits, s5.probes["linear"], config, cache_key=s5.key)
    assert all(tp.history.get("cached") for tp in again[1:])


def test_one_test_sentence_gives_no_interval_and_an_inconclusive_verdict(tiny_lm, sentences, module_data_folder):
    s = study.probe_sample(tiny_lm, sentences, "lee", 40, seed=0, **FAST)  # 3 sentences: 1 per split
    c8 = study.c8_evidence(s, study.ablations(s))
    e = c8.evidence
    for iv in (e.unit_minus_raw, e.norm_vs_chance, e.norm_adds):
        assert iv.n == 1 and math.isfinite(iv.estimate) and math.isnan(iv.low) and math.isnan(iv.high)
    assert judge(c8.evidence, Rules("rule", "original rule")).verdict == INCONCLUSIVE


def test_every_architecture_runs_every_study(tiny_any, module_data_folder):
    texts = sample_sentences(load_corpus("lee"), 12, seed=1, tokenizer=tiny_any.tokenizer, min_tokens=5, max_tokens=24)
    s = study.probe_sample(tiny_any, texts, "lee", 24, seed=1, epochs=1, batch_size=256, mlp_hidden=8, patience=1)
    a = study.ablations(s, 2.0)
    results = [s, study.cosine_vs_l2(s), a, study.norms_and_angles(s, 5), study.c8_evidence(s, a)]
    assert [type(r) for r in results] == list(study.RESULTS)
    recorded = {k: v for r in results for k, v in r.record().items()}
    assert len(recorded) == sum(len(r.record()) for r in results)  # no key recorded twice
    assert recorded["angle_median"][0] < 0.1 and recorded["naive_cos"][0] == 1.0
    assert prose.norm_model_text(tiny_any.adapter.family, tiny_any.adapter.causal, tiny_any.adapter.pre_ln)


def test_texts_follow_the_results(cos_l2, abl, na, c8, sample):
    assert f"{c8.c8_unit_norm_rate_last:.1%}" in prose.c8_text(c8, abl, cos_l2)
    assert f"{cos_l2.linear_cos_cos[-1]:.1%}" in prose.cosine_l2_text(cos_l2)
    assert f"{sample.test_tokens} test tokens" in prose.probe_sample_text(sample)
    assert f"{na.angle_increasing_layers} of {sample.n_layers}" in prose.norms_angles_text(na)
    costly = dataclasses.replace(abl, unit_minus_original_min=-0.2, rescale_naive_cos_max_change=0.01)
    assert "next to nothing" in prose.ablation_text(dataclasses.replace(abl, unit_minus_original_min=0.0), cos_l2)
    text = prose.ablation_text(costly, cos_l2)
    assert "the length carries part of the identity" in text and "changes by at most 1.0%" in text
    useless = dataclasses.replace(abl, norm_only_best_max=cos_l2.chance)
    useful = dataclasses.replace(abl, norm_only_best_max=10 * cos_l2.chance)
    assert "close to useless" in prose.ablation_text(useless, cos_l2)
    assert "not useless" in prose.ablation_text(useful, cos_l2)
    assert "post-LayerNorm" in prose.norm_model_text("bert", False, False)
    assert "Pre-LayerNorm" in prose.norm_model_text("gpt2", True, True)
