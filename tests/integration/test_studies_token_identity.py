"""Chapter 4's studies (token identity) on tiny random models: what each section records, the intervals the
verdicts take, and what holds by construction whatever the weights."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest
import torch

from identifiability import identity as ident
from identifiability.base.stats import Interval, hierarchical_ci, hierarchical_interval
from identifiability.book import schema
from identifiability.chapters.contract import by_name
from identifiability.corpus.corpora import load_corpus, sample_sentences
from identifiability.studies import token_identity as study
from identifiability.text import token_identity as prose
from identifiability.verdicts import INCONCLUSIVE, Rules
from identifiability.verdicts.token_identity import c6

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
    return study.identity_claims(sample, probes, **FAST)


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
    assert all(0 <= b <= s <= FAST["epochs"] for b, s in zip(t["best epoch"], t["epochs run"]))
    assert list(probes.overview.probes) == [L + 1] * 4
    # early stopping triggered exactly where `patience` epochs passed without a better validation loss
    early = [s - b >= FAST["patience"] for b, s in zip(t["best epoch"], t["epochs run"])]
    assert t["stopped early"] == early and probes.probes_stopped_early == sum(early)
    assert probes.probes_at_cap == len(early) - sum(early) and probes.probes_trained == len(early)
    assert (probes.levels_off_at_cap is None) == all(early)
    # the validation rate per epoch: epoch 0 (the initial weights) to the last epoch any probe trained
    epochs = probes.probes["linear"].history["epochs"]
    assert len(probes.curves) == 2 * 2 * (L + 1) * (epochs + 1) or probes.curves.epoch.max() >= 1
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


def test_claim_intervals_resample_probe_seeds_and_test_sentences(sample, probes, rates, claims):
    test, L = sample.splits["test"], sample.n_layers
    n_test_sentences = int(torch.unique(test.sentence).numel())
    for iv in (claims.last_rate, claims.naive_drop, claims.c6.over_position, claims.c6.rate_seed0):
        assert iv.n == n_test_sentences and iv.has_interval
        assert iv.low <= iv.estimate <= iv.high
    assert claims.naive_drop_by_token.n == test.n
    # per seed, sentence and layer the share of the sentence's tokens identified; seed 0 is the chapter's probe
    assert claims.rates.shape == (3, n_test_sentences, L + 1)
    first = [g.mean() for g in ident.correct_by_sentence(probes.probes["linear"], test, L)]
    assert claims.rates[0, :, L] == pytest.approx(first)
    # C6's estimate is the mean over seeds and sentences, its interval the hierarchical bootstrap's
    assert len(claims.c6_seed_rates) == 3
    assert claims.last_rate.estimate == pytest.approx(np.mean(claims.c6_seed_rates))
    assert claims.linear_cos_cos_by_layer[L] == pytest.approx(claims.last_rate.estimate)
    assert (claims.last_rate.low, claims.last_rate.high) == hierarchical_ci(claims.rates[..., L], 1)[1:]
    # the paired differences: per seed and sentence, the probe minus the position-only lookup
    diff = claims.rates[..., L] - claims.position
    assert claims.c6.over_position.estimate == pytest.approx(diff.mean())
    assert claims.c6_over_position == [claims.c6.over_position.estimate, *hierarchical_ci(diff, 1)[1:]]
    assert claims.c6.rate_seed0.estimate == pytest.approx(np.mean(first))
    # the original rule's interval: per token the share of seeds that identify it, sentences resampled
    sizes = np.array([len(g) for g in ident.correct_by_sentence(probes.probes["linear"], test, L)])
    token_weighted = (claims.rates[..., L] * sizes).sum(1) / sizes.sum()
    assert claims.c6.original_rate.estimate == pytest.approx(token_weighted.mean())
    # C7: the identity map's rate at layer L minus at layer 1
    naive = rates.rates_sentence["naive"]["none"]["cos"]
    assert claims.naive_drop.estimate == pytest.approx(naive[L] - naive[1], abs=1e-4)
    assert claims.naive_drop_by_token.estimate == pytest.approx(claims.naive_drop.estimate)
    for est, (lo, hi) in zip(claims.linear_cos_cos_by_layer, claims.linear_cos_cos_ci95_by_layer):
        assert _is_nan_or_within(est, lo, hi)


def test_the_position_only_lookup_knows_position_and_nothing_else(sample, claims):
    """Its rate per sentence is what looking up the mean training x of each position gives; two tokens at
    the same position of different sentences get the same query."""
    train, test = sample.splits["train"], sample.splits["test"]
    rows = ident.position_only_rows(train, test)
    ok = (test.key[rows] == test.key).double().numpy()
    per_sentence = [ok[test.sentence.numpy() == s].mean() for s in np.unique(test.sentence.numpy())]
    assert claims.position == pytest.approx(per_sentence)
    assert claims.c6_position_rate == pytest.approx(np.mean(per_sentence))
    assert claims.c6.chance < claims.c6_position_rate or claims.c6_position_rate == 0


def test_the_rates_by_sentence_are_recorded_for_the_fine_tuning_chapter(sample, texts, claims):
    r = claims.linear_rate_by_sentence
    test, L = sample.splits["test"], sample.n_layers
    ids = torch.unique(test.sentence).tolist()
    assert r["sentence_keys"] == [hashlib.sha1(texts[i].encode()).hexdigest()[:12] for i in ids]
    assert r["probe_seeds"] == [0, 1, 2] and r["layers"] == list(range(1, L + 1))
    assert np.array(r["rate"]) == pytest.approx(claims.rates[..., 1:], abs=1e-6)
    assert np.array(r["rate"]).shape == (3, len(ids), L)
    # C13's power at the ceiling reads the test tokens of each sentence, in the same order
    assert r["tokens"] == [int((test.sentence == i).sum()) for i in ids] and sum(r["tokens"]) == len(test.sentence)


def test_a_sentence_interval_is_as_wide_as_the_sentences_disagree():
    """Two sentences, one all identified and one all missed: resampling sentences spans 0 to 1; three seeds
    that agree leave it so, and seeds that disagree on one sentence widen the interval of the other's mean."""
    iv = hierarchical_interval(np.array([1.0, 0.0]), 0, seed=0)
    assert (iv.estimate, iv.low, iv.high, iv.n) == (0.5, 0.0, 1.0, 2)
    agree = hierarchical_interval(np.array([[0.8] * 20] * 3), 1, seed=0)
    assert agree.low == agree.high == pytest.approx(0.8)
    disagree = hierarchical_interval(np.array([[0.7] * 20, [0.8] * 20, [0.9] * 20]), 1, seed=0)
    assert disagree.low < 0.8 < disagree.high and disagree.n == 20


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
    c = study.identity_claims(one, pr, **{**FAST, "epochs": 2}, more_seeds=(1,))
    assert c.last_rate.n == 1 and not c.last_rate.has_interval and math.isfinite(c.last_rate.estimate)
    assert math.isnan(c.naive_drop.low) and math.isnan(c.naive_drop.high)
    assert len(c.c6_seed_rates) == 2 and c.linear_rate_by_sentence["probe_seeds"] == [0, 1]
    v = c6(c.c6, Rules("rule", "original rule"))
    assert v.verdict == INCONCLUSIVE and v.original.verdict == INCONCLUSIVE


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
    schema.check(by_name("token_identity").stem, recorded)
    assert not {"hs", "splits", "probes", "rates", "c6", "naive_drop", "curves", "position"} & set(recorded)


def test_every_architecture_runs_the_first_sections(tiny_any, module_data_folder):
    texts = sample_sentences(load_corpus("lee"), 12, seed=0, tokenizer=tiny_any.tokenizer, min_tokens=6, max_tokens=30)
    s = study.hidden_sample(tiny_any, texts, "lee", max_tokens=30, seed=0, include_special=False)
    pr = study.trained_probes(s, epochs=1, batch_size=256, mlp_hidden=16, patience=1, seed=0)
    r = study.identification(s, pr)
    assert s.causal == bool(tiny_any.adapter.causal)
    assert r.naive_layer0 == [1.0, 1.0, 1.0, 1.0]
    assert len(r.rates_sentence["linear"]["cos"]["cos"]) == tiny_any.n_layers + 1


# --- generated text -----------------------------------------------------------------------------------------


def test_training_text_says_whether_probes_stopped_early_and_where_capped_ones_level_off(probes):
    done = dataclasses.replace(probes, probes_stopped_early=10, probes_trained=10, probes_at_cap=0)
    levelled = dataclasses.replace(probes, epoch_cap=40, patience=3, probes_at_cap=2, levels_off_at_cap=12)
    moving = dataclasses.replace(levelled, levels_off_at_cap=39)
    texts = [prose.training_text(r) for r in (done, levelled, moving)]
    assert "Every probe was trained until its validation loss stopped improving" in texts[0]
    assert "from epoch 12 on" in texts[1] and "reached the cap" in texts[1]
    assert "had not levelled off" in texts[2] and "from epoch" not in texts[2]
    assert len(set(texts)) == 3


def test_c6_text_says_on_which_side_of_the_position_only_lookup_the_probe_lies(claims):
    above = dataclasses.replace(claims.c6, over_position=Interval(0.3, 0.25, 0.35, 20))
    below = dataclasses.replace(claims.c6, over_position=Interval(-0.3, -0.35, -0.25, 20))
    up, down = (prose.c6_text(dataclasses.replace(claims, c6=c)) for c in (above, below))
    assert "30.0% above the position-only lookup" in up and "30.0% below the position-only lookup" in down
    assert f"{claims.c6.position_rate:.1%}" in up


def test_chapter_4_texts_follow_their_results(sample, probes, rates, claims):
    keeps = dataclasses.replace(rates, naive_cos_first_layer_below_99=None)
    drops = dataclasses.replace(rates, naive_cos_first_layer_below_99=3)
    assert "above 99 % at every layer" in prose.identification_text(keeps)
    assert "drops from layer 3 on" in prose.identification_text(drops)
    assert f"{claims.unseen.estimate:.1%}" in prose.unseen_text(claims)
    assert prose.model_text("bert", False) != prose.model_text("gpt2", True)
    nr = study.neighbours(sample, probes, rates)
    same = dataclasses.replace(nr, linear_cos_last_miss_same_word=0.8)
    other = dataclasses.replace(nr, linear_cos_last_miss_same_word=0.2)
    assert "mostly the position, not the word" in prose.neighbour_text(same)
    assert "mostly the position" not in prose.neighbour_text(other)
    second = study.SecondCorpusResult("polarity", 20, 50, {}, {}, 0.1, rates.linear_cos_cos_last, 0.5, None)
    far = dataclasses.replace(second, second_linear_cos_cos_last=rates.linear_cos_cos_last - 0.3)
    assert "keep their shape" in prose.second_corpus_text(second, rates, "lee")
    assert "differ noticeably" in prose.second_corpus_text(far, rates, "lee")
