"""The hierarchical bootstrap: seed-to-seed spread must reach the interval, and paired sentences stay paired."""

import numpy as np
import pytest

from identifiability.base.stats import hierarchical_ci, hierarchical_resamples, paired_ci


def test_seed_spread_widens_the_interval_that_sentence_resampling_alone_misses():
    rng = np.random.default_rng(0)
    # three seeds whose means differ by 0.2; within a seed the sentences barely vary
    v = rng.normal(0, 0.01, (3, 50)) + np.array([[0.0], [0.2], [-0.2]])
    _, lo, hi = hierarchical_ci(v, levels=1)
    _, lo1, hi1 = hierarchical_ci(v[:1], levels=1)
    assert hi - lo > 0.2 and hi1 - lo1 < 0.02


def test_sentences_are_resampled_jointly_across_seeds_so_a_constant_difference_has_no_spread():
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, 40)  # sentences differ a lot
    diff = np.stack([base + 0.1 - base, base + 0.1 - base])  # every seed: the same per-sentence difference
    est, lo, hi = hierarchical_ci(diff, levels=1)
    assert abs(est - 0.1) < 1e-12 and abs(lo - 0.1) < 1e-12 and abs(hi - 0.1) < 1e-12


def test_without_seed_levels_it_agrees_with_the_plain_sentence_bootstrap():
    rng = np.random.default_rng(2)
    a = rng.normal(0.5, 0.2, 60)
    est, lo, hi = hierarchical_ci(a[None, :], levels=1)
    pest, plo, phi = paired_ci(a, np.zeros_like(a))
    assert abs(est - pest) < 1e-12 and abs(lo - plo) < 0.02 and abs(hi - phi) < 0.02


def test_trailing_axes_are_kept_apart_and_one_sentence_gives_no_interval():
    v = np.random.default_rng(3).normal(size=(3, 3, 20, 6))
    assert hierarchical_resamples(v, levels=2, n_resamples=7).shape == (7, 6)
    est, lo, hi = hierarchical_ci(np.ones((3, 1)), levels=1)
    assert est == 1 and np.isnan(lo) and np.isnan(hi)


def test_the_power_to_detect_a_change_matches_a_simulation_of_token_correctness():
    """C13's power at the ceiling, checked independently: sentences of 2-4 test tokens, each identified with
    probability 0.95 against a reference that identifies all (a true difference of -0.05). Over simulated
    test sets, the variance of the mean of per-sentence rates is ``rate_variance``'s, and an interval
    estimate ± 1.96 sqrt(V) excludes 0 about as often as ``power_to_detect`` says."""
    from identifiability.base.stats import power_to_detect, rate_variance

    rng = np.random.default_rng(0)
    tokens = rng.integers(2, 5, 40)
    v = rate_variance(0.95, tokens)
    power = power_to_detect(0.05, v)
    assert 0.3 < power < 0.9  # a case where the answer is not trivially 0 or 1
    reps = 20000
    correct = rng.random((reps, int(tokens.sum()))) < 0.95
    starts = np.concatenate([[0], np.cumsum(tokens)[:-1]])
    rates = np.add.reduceat(correct, starts, axis=1) / tokens  # (reps, sentences)
    d = rates.mean(axis=1) - 1.0
    assert d.mean() == pytest.approx(-0.05, abs=0.001)
    assert d.var() == pytest.approx(v, rel=0.05)
    assert np.mean(np.abs(d) > 1.959964 * np.sqrt(v)) == pytest.approx(power, abs=0.03)
    # the edges: no variance detects any change for certain and none that is absent; unknown is unknown
    assert power_to_detect(0.05, 0.0) == 1.0 and power_to_detect(0.0, 0.0) == 0.0
    assert np.isnan(power_to_detect(0.05, rate_variance(0.95, [])))
    assert power_to_detect(0.05, 1e-6) > 0.999 and power_to_detect(0.0, 1e-3) == pytest.approx(0.05, abs=1e-6)
