"""C10's sampler (identifiability.recorded.proportional): who is eligible, the drawing weights against an independent
computation, and the estimator unbiased on a synthetic corpus whose answer is known, where a length-uniform
draw is not."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from identifiability.hta import HTAResult
from identifiability.recorded import proportional


def _percentile(xs: list[int], q: float) -> float:
    """The q-th percentile by linear interpolation between order statistics, written out (numpy's default)."""
    s = sorted(xs)
    pos = q / 100 * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def test_eligible_sentences_and_their_weights_match_an_independent_computation():
    rng = np.random.default_rng(3)
    lengths = [int(x) for x in rng.integers(4, 90, size=501)]
    pool = proportional.eligible(lengths)
    cut = _percentile(lengths, 95)
    keep = [i for i, n in enumerate(lengths) if n <= cut]
    assert pool.indices.tolist() == keep and pool.max_tokens == int(cut)
    assert pool.covered == pytest.approx(sum(lengths[i] for i in keep) / sum(lengths))
    assert (pool.corpus_sentences, pool.corpus_tokens) == (501, sum(lengths))
    total = sum(lengths[i] for i in keep)
    assert pool.weights.tolist() == pytest.approx([lengths[i] / total for i in keep])
    # the draws follow the weights: frequencies over 200,000 draws within 5 binomial sds
    draws = np.array(proportional.draw(pool, 200_000, seed=1))
    freq = np.bincount(draws, minlength=len(lengths)) / len(draws)
    for i in range(len(lengths)):
        p = lengths[i] / total if i in set(keep) else 0.0
        assert abs(freq[i] - p) <= 5 * math.sqrt(p * (1 - p) / len(draws)) + 1e-12


def test_draws_are_seeded_and_a_larger_n_extends_the_same_sample():
    pool = proportional.eligible([5, 10, 20, 40, 80, 7, 9])
    a = proportional.draw(pool, 50, seed=4)
    assert a == proportional.draw(pool, 50, seed=4) and a != proportional.draw(pool, 50, seed=5)
    assert proportional.draw(pool, 80, seed=4)[:50] == a
    assert 4 not in a  # 80 tokens lies above the 95th percentile
    with pytest.raises(ValueError, match="at least 1"):
        proportional.draw(pool, 0, seed=0)


def test_the_estimate_is_unbiased_for_the_share_over_hidden_tokens_and_a_uniform_draw_is_not():
    """A corpus where long sentences keep the own token on top more often: the answer is the share over the
    eligible sentences' hidden tokens. The mean of 2,000 seeded estimates (50 draws each) lands within 0.004
    of it (its standard error is about 0.0015); the mean of a length-uniform draw's estimates lands on the
    per-sentence average, about 0.09 away, which the same tolerance rejects."""
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(6, 70, size=400)]
    y = {i: min(1.0, 0.3 + n / 100) for i, n in enumerate(lengths)}  # the known per-sentence shares
    pool = proportional.eligible(lengths)
    ok = pool.indices.tolist()
    truth = sum(lengths[i] * y[i] for i in ok) / sum(lengths[i] for i in ok)
    runs = 2000
    ours = [np.mean([y[i] for i in proportional.draw(pool, 50, seed)]) for seed in range(runs)]
    uniform = [np.mean([y[i] for i in np.random.default_rng(seed).choice(ok, 50)]) for seed in range(runs)]
    assert abs(np.mean(ours) - truth) < 0.004
    assert abs(np.mean(uniform) - truth) > 0.004 * 5


def test_sentences_needed_follows_the_stated_rule():
    # version 2's interval 0.519-0.596 over 20 sentences: sd 0.088, 32.9 sentences for 0.03, twice that
    assert proportional.PILOT_SD == pytest.approx(0.0879, abs=1e-3)
    assert proportional.sentences_needed() == 66
    assert proportional.sentences_needed(0.2, 0.03, 1.0) == math.ceil((1.96 * 0.2 / 0.03) ** 2)
    # a sample of that size from the pilot's sd has a half-width at most 0.03
    n = proportional.sentences_needed()
    assert 1.96 * proportional.PILOT_SD / math.sqrt(n) <= 0.03


def test_sentence_row_counts_own_token_tops_at_the_last_layer_words_and_special_apart():
    n = 5
    eye = torch.eye(n, dtype=torch.float64)
    last = 0.6 * eye + 0.1 * (1 - eye)
    last[0] = torch.tensor([0.1, 0.6, 0.1, 0.1, 0.1], dtype=torch.float64)  # [CLS] loses the top place
    last[2] = torch.tensor([0.1, 0.1, 0.1, 0.6, 0.1], dtype=torch.float64)  # so does a word
    c = torch.stack([eye, eye, last])  # layer 1 keeps every token on top: only the last layer counts
    r = HTAResult("x", list("abcde"), c**2, "synthetic", special=[True, False, False, False, True])
    row = proportional.sentence_row(r)
    assert row == {
        "tokens": 5,
        "words": 3,
        "special": 2,
        "top_self": 3,
        "top_self_words": 2,
        "top_self_special": 1,
        "share": 0.6,
        "share_words": pytest.approx(2 / 3),
        "share_special": 0.5,
        "chance": 0.2,
    }
    plain = proportional.sentence_row(HTAResult("x", list("abcde"), c**2, "synthetic", special=[False] * 5))
    assert plain["share_special"] is None and plain["share_words"] == plain["share"] == 0.6


def test_shortest_drawn_takes_the_shortest_distinct_of_the_first_draws():
    lengths = [10, 4, 7, 4, 9, 30, 5]
    pool = proportional.eligible(lengths, percentile=100)
    first = proportional.draw(pool, 6, seed=2)
    distinct = list(dict.fromkeys(first))
    want = sorted(distinct, key=lambda i: (lengths[i], distinct.index(i)))[:3]
    assert proportional.shortest_drawn(pool, lengths, 3, 6, seed=2) == want
    assert [lengths[i] for i in want] == sorted(lengths[i] for i in want)
    assert proportional.shortest_drawn(pool, lengths, 99, 6, seed=2) == sorted(
        distinct, key=lambda i: (lengths[i], distinct.index(i))
    )


def test_shares_average_each_draw_repeats_included():
    """A sentence drawn twice counts twice; words and special tokens over the draws that have them."""
    rows = {
        0: {"share": 1.0, "share_words": 1.0, "share_special": None, "chance": 0.5},
        1: {"share": 0.0, "share_words": 0.0, "share_special": 0.0, "chance": 0.25},
    }
    got = proportional.shares(rows, [0, 0, 1], seed=0)
    assert got["all"].estimate == pytest.approx(2 / 3) and got["words"].estimate == pytest.approx(2 / 3)
    assert got["special"].estimate == 0.0 and got["special"].n == 1
    assert got["chance"] == pytest.approx((0.5 + 0.5 + 0.25) / 3) and got["word_chance"] == got["chance"]
