"""The agreement statistic of chapter 10 (C22-C27) against independent computations: scipy's Spearman per row,
a derangement that never keeps a row in place, the distance-only baseline written out, top-k overlaps."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from identifiability.contributions.agreement import (
    agreement,
    derangement,
    distance_baseline,
    row_spearman,
    without_own,
)


def test_row_spearman_is_scipys_per_row_with_ties_and_constant_rows():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, size=(5, 9)).astype(float)  # many ties
    b = rng.normal(size=(5, 9))
    want = [spearmanr(x, y).statistic for x, y in zip(a, b)]
    assert row_spearman(a, b) == pytest.approx(want)
    assert np.isnan(row_spearman(np.ones((1, 4)), b[:1, :4])[0])


def test_derangement_moves_every_row():
    rng = np.random.default_rng(1)
    for n in (2, 3, 7):
        for _ in range(50):
            p = derangement(n, rng)
            assert sorted(p) == list(range(n)) and not (p == np.arange(n)).any()
    with pytest.raises(ValueError):
        derangement(1, rng)


def test_distance_baseline_written_out():
    b = distance_baseline(4, 2)
    assert np.allclose(b[0], np.eye(4))
    row = np.array([1 / 2, 1, 1 / 2, 1 / 3])
    assert np.allclose(b[2, 1], row / row.sum()) and np.allclose(b[1], b[2])


def test_without_own_drops_the_diagonal():
    c = np.arange(9.0).reshape(3, 3)
    assert without_own(c).tolist() == [[1, 2], [3, 5], [6, 7]]


def test_agreement_of_a_measure_with_itself_and_with_its_reverse():
    rng = np.random.default_rng(2)
    r = rng.dirichlet(np.ones(6), size=(4, 6))
    same = agreement(r, r)
    assert np.isnan(same.spearman[0]) and np.allclose(same.spearman[1:], 1) and np.allclose(same.top1[1:], 1)
    assert np.allclose(same.top3[1:], 1)
    rev = agreement(-r, r)
    assert np.allclose(rev.spearman[1:], -1) and np.allclose(rev.top1[1:], 0)


def test_the_shuffled_null_reads_other_rows():
    """A measure whose rows are all alike (a column effect) scores the same on its shuffled rows."""
    rng = np.random.default_rng(3)
    row = rng.dirichlet(np.ones(7))
    m = np.broadcast_to(row, (3, 7, 7)).copy()
    r = m + rng.normal(0, 1e-3, m.shape)
    a = agreement(m, r)
    assert np.allclose(a.spearman[1:], a.shuffled[1:], atol=0.1)


def test_agreement_refuses_bad_shapes():
    with pytest.raises(ValueError, match="L\\+1, d_s, d_s"):
        agreement(np.zeros((2, 3, 3)), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="at least 3 tokens"):
        agreement(np.zeros((2, 2, 2)), np.zeros((2, 2, 2)))
