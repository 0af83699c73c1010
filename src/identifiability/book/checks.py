"""The checks the exercises' check cells call, one function per exercise, grouped by chapter.

A check cell shows a student which variables it reads and which of the chapter's quantities it compares
them with; what the right answer is stays here, so that no cell of a student version shows it (the
solutions are the notebooks', folded on the page and left out of the student version). Each check raises
:class:`identifiability.book.handout.CheckFailed` with one line that says what is wrong, without the value a
right answer has; it returns None when the answer passes. ``tests/unit/test_checks.py`` runs each on the
value its chapter's solution computes and on a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .handout import check

# --- 1. The model and the data ------------------------------------------------------------------------------


def most_attended(h, key_token, last: torch.Tensor, tokens: Sequence[str]) -> None:
    """Exercise 1.1: ``h`` is the head of ``last`` (the last layer's attention, (H, d_s, d_s)) with the
    largest mean row maximum, ``key_token`` the token of its most attended key."""
    n_heads = last.shape[0]
    check(0 <= int(h) < n_heads, f"h = {h} is not a head index (0 to {n_heads - 1})")
    peak = last.max(-1).values.mean(-1)  # (H,)
    check(float(peak[int(h)]) >= float(peak.max()) - 1e-6, f"another head has a larger mean row maximum than head {h}")
    check(key_token in tokens, f"{key_token!r} is not a token of the example sentence")
    received = last[int(h)].sum(0)  # (d_s,) the attention each key receives
    best = max(float(received[i]) for i, t in enumerate(tokens) if t == key_token)
    check(best >= float(received.max()) - 1e-6, f"{key_token!r} is not the key most attended to in head {h}")


def corpus_share(share, longest_sentence, n_sentences: int, sample_longest: int, d_v: int) -> None:
    """Exercise 1.2: ``share`` of the ``n_sentences`` of the corpus are longer than ``d_v`` tokens, the
    longest has ``longest_sentence`` (at least the sample's ``sample_longest``)."""
    check(0 <= share <= 1, f"share = {share} is not a share between 0 and 1")
    check(
        abs(share * n_sentences - round(share * n_sentences)) < 1e-6,
        f"share is not a number of sentences divided by the corpus's {n_sentences}",
    )
    check(longest_sentence >= sample_longest, f"the sample above has a sentence of {sample_longest} tokens")
    check(
        (share > 0) == (longest_sentence > d_v), "share and longest_sentence disagree about sentences longer than d_v"
    )


# --- 2. Nonidentifiability ----------------------------------------------------------------------------------


def null_dimensions(ln1_dims: Mapping[int, int], first_alt, d_v: int) -> None:
    """Exercise 2.1: dim LN([T, 1]) of a generic head at d_s = d_v .. d_v + 3, and the first d_s where it is
    not 0."""
    want = {d_v, d_v + 1, d_v + 2, d_v + 3}
    check(set(ln1_dims) == want, f"ln1_dims should have one entry per d_s in {sorted(want)}, not {sorted(ln1_dims)}")
    for n, k in ln1_dims.items():
        # [T, 1] has rank d_v + 1 for a generic T of d_s >= d_v + 1 rows
        check(k == max(0, n - d_v - 1), f"d_s = {n}: {k} is not the dimension of LN([T, 1]) there")
    check(
        first_alt == min(n for n in ln1_dims if max(0, n - d_v - 1) > 0),
        f"first_alt = {first_alt} is not the first d_s at which LN([T, 1]) has a non-zero dimension",
    )


def full_step(errs: Sequence[float], mins: Sequence[float], n_heads: int) -> None:
    """Exercise 2.2: the relative output change and the smallest weight of each head's alternative at the
    full step."""
    check(len(errs) == len(mins) == n_heads, f"errs and mins should hold one value per head ({n_heads})")
    check(max(errs) <= 1e-10, f"an alternative changed its head's output by {max(errs):.1e}: stay in LN([T, 1])")
    check(
        max(abs(m) for m in mins) <= 1e-12,
        f"the smallest weights lie between {min(mins):.1e} and {max(mins):.1e}: is it the full step?",
    )


def realisability_ranks(ranks: Mapping[float, int | None], d_q: int, causal: bool) -> None:
    """Exercise 2.3: the rank of the centred log of A + s t D for s = 0.9, 1e-2, 1e-4."""
    check(set(ranks) == {0.9, 1e-2, 1e-4}, f"ranks should have the steps 0.9, 1e-2 and 1e-4, not {sorted(ranks)}")
    if causal:  # a causal head's test reads another matrix; its ranks are not compared
        return
    for s, r in ranks.items():
        check(r is not None and r > d_q, f"s = {s:g}: rank {r} is not the rank of the centred log of A + s t D")


# --- 3. Effective attention ---------------------------------------------------------------------------------


def effective_by_hand(A_eff_hand: torch.Tensor, lm, texts: Sequence[str], precision: str) -> None:
    """Exercise 3.1: effective attention of the last head of layer 1 of ``texts[0]``, against the library's
    (the value bias in T)."""
    from ..studies.effective_attention import viewer_examples

    _, raw, eff = viewer_examples(lm, texts[:1], precision).examples[0]
    A, lib = raw[0, lm.n_heads - 1].double(), eff[0, lm.n_heads - 1].double()
    check(tuple(A_eff_hand.shape) == tuple(lib.shape), f"A_eff_hand should be d_s x d_s = {tuple(lib.shape)}")
    check(not torch.allclose(A_eff_hand.double(), A, atol=1e-4), "A_eff_hand is A itself: project the rows of A")
    err = float((A_eff_hand.double() - lib).abs().max())
    check(err < 1e-4, f"A_eff_hand differs from the library's effective attention by up to {err:.1e}")


def same_output(A2: torch.Tensor, A: torch.Tensor, T: torch.Tensor) -> None:
    """Exercise 3.2: ``A2`` differs from ``A`` but gives the same output A2 T."""
    check(A2.shape == A.shape, f"A2 should have A's shape {tuple(A.shape)}")
    att = float((A2 - A).norm() / A.norm())
    AT = A.double() @ T.double()
    out = float((A2.double() @ T.double() - AT).norm() / AT.norm())
    check(att > 1e-3, f"A2 is (almost) A (relative change {att:.1e}): change it")
    check(out < 1e-6, f"the output changed by {out:.1e} (relative): A2 T must equal A T")


def rank_trap(naive, relative, d_v: int) -> None:
    """Exercise 3.3: the rank of T with an absolute threshold and with a relative one."""
    check(0 < int(relative) <= d_v, f"rank {relative} is impossible: T = V_h W_O^h has rank at most d_v")
    check(
        int(naive) >= int(relative), "an absolute threshold of 1e-10 keeps every singular value the relative one keeps"
    )


def least_explained(worst, table, longest: int) -> None:
    """Exercise 3.4: ``worst`` indexes the (at most) five heads of ``table`` (Figure 1 (a)'s) whose mean
    Pearson correlation at the longest length ``longest`` is lowest."""
    means = table[table.d_s == longest].groupby(["layer", "head"]).pearson.mean()
    check(len(worst) == min(5, len(means)), f"worst should list {min(5, len(means))} heads, not {len(worst)}")
    check(set(worst.index) <= set(means.index), "worst should be indexed by (layer, head) pairs of fig1.table")
    rest = means.drop(list(worst.index))
    check(
        rest.empty or means[list(worst.index)].max() <= rest.min() + 1e-12,
        "a head outside worst has a lower mean correlation at the longest length than one inside it",
    )


# --- 4. Token identity --------------------------------------------------------------------------------------


def lost_tokens(pairs, rate: float, n_test: int) -> None:
    """Exercise 4.1: one row of ``pairs`` per test token the last layer's probe misses (``rate``: its rate)."""
    check(
        {"token", "taken for"} <= set(pairs.columns),
        f"pairs needs the columns 'token' and 'taken for', not {list(pairs.columns)}",
    )
    check(len(pairs) == round((1 - rate) * n_test), f"{len(pairs)} misses is not what the last-layer rate above leaves")


def identity_or_position(n_miss_all, n_same_word, rate_all: float, n_test: int) -> None:
    """Exercise 4.2: the misses with all test tokens as candidates, and how many retrieve the same word."""
    check(
        int(n_miss_all) == round((1 - rate_all) * n_test),
        f"{n_miss_all} misses is not what the rate with all candidates leaves of the {n_test} test tokens",
    )
    check(0 <= int(n_same_word) <= int(n_miss_all), "n_same_word counts some of the misses: between 0 and n_miss_all")


def small_probe(small_rate, n_test: int) -> None:
    """Exercise 4.3: the test rate of a probe trained on a tenth of the training sentences."""
    check(0 <= small_rate <= 1, f"small_rate = {small_rate} is not a rate")
    check(
        abs(small_rate * n_test - round(small_rate * n_test)) < 1e-6,
        f"small_rate is not a share of the {n_test} test tokens: evaluate on the test split",
    )


def probe_by_hand(W: torch.Tensor, hand_rate, train, lin, L: int, n_test: int, chance: float) -> None:
    """Exercise 4.4: ``W`` ((d+1, d)) an affine map fitted to ``train``'s tokens at layer ``L``
    (``train.inputs[L]`` -> ``train.targets``, (n, d) each) with no larger squared error than the trained L2
    probe of ``lin`` at that layer, and ``hand_rate`` its identification rate on the test tokens, above
    ``chance``."""
    inputs, targets = train.inputs[L], train.targets.double()
    d = targets.shape[-1]
    check(tuple(W.shape) == (d + 1, d), f"W is {tuple(W.shape)}, not (d+1, d) = ({d + 1}, {d}): weights, then bias")
    rows = torch.cat([inputs, torch.ones(len(inputs), 1, dtype=inputs.dtype)], 1).double()
    err = float(((rows @ W.double() - targets) ** 2).sum(-1).mean())
    trained = lin.probe.forward_one(list(zip(lin.layers, lin.losses)).index((L, "l2")), inputs).detach()
    probe = float(((trained.double() - targets) ** 2).sum(-1).mean())
    # least squares has the smallest training error of all affine maps
    check(err <= probe * 1.01, f"W's squared training error ({err:.3f}) is above the trained L2 probe's ({probe:.3f})")
    check(abs(hand_rate * n_test - round(hand_rate * n_test)) < 1e-6, f"hand_rate is not a share of {n_test} tokens")
    check(
        hand_rate > chance, f"hand_rate = {hand_rate:.3f} is not above chance ({chance:.3f}): look up in the sentence"
    )


# --- 5. Angle and magnitude ---------------------------------------------------------------------------------


def scale_free(change: Mapping[tuple, float]) -> None:
    """Exercise 5.1: the largest change of each rate when every embedding is scaled by 3, keyed by
    (mapping, loss, lookup)."""
    check({k[0] for k in change} == {"naive", "linear"}, "change needs the naive and the linear mapping")
    check(all(0 <= v <= 1 for v in change.values()), "a change of a rate lies between 0 and 1")
    # cos(c e, x) = cos(e, x): the identity map with the cosine lookup cannot move
    cos = [v for k, v in change.items() if k[0] == "naive" and k[-1] == "cos"]
    check(bool(cos) and max(cos) == 0, "one of your combinations changed its rate though scaling cannot move it")


def length_correlations(r_position, r_length, n_test: int) -> None:
    """Exercise 5.2: correlations of the last layer's norms with position and with sentence length."""
    for name, r in [("r_position", r_position), ("r_length", r_length)]:
        check(np.isfinite(r) and -1 <= r <= 1, f"{name} = {r} is not a correlation (between -1 and 1)")
    check(abs(r_position - r_length) > 1e-12 or n_test < 3, "r_position and r_length are the same number")


def cone_angles(angle_sentence, angle_word) -> None:
    """Exercise 5.3: mean angles, in degrees, between input embeddings of a sentence and of one word."""
    check(0 < angle_sentence < 180, f"angle_sentence = {angle_sentence} is not a mean angle in degrees")
    check(not np.isfinite(angle_word) or 0 <= angle_word < 180, f"angle_word = {angle_word} is not an angle in degrees")


# --- 6. Context mixing --------------------------------------------------------------------------------------


def hta_row_by_hand(c_hand: torch.Tensor, c: torch.Tensor) -> None:
    """Exercise 6.1: the contributions of layer 1's last hidden token, against the engine's ``c``
    ((layers + 1, d_s, d_s) of the first exact sentence)."""
    want = c[1, -1]
    check(tuple(c_hand.shape) == tuple(want.shape), f"c_hand should hold {want.shape[0]} entries, one per input")
    check(
        torch.allclose(c_hand.double(), want.double(), atol=1e-4),
        "c_hand differs from the engine's: check the layer, the hidden token and the normalisation over j",
    )


def summed_gradient(c_sum: torch.Tensor, c_last: torch.Tensor) -> None:
    """Exercise 6.2: the normalised gradient norms of each hidden token's summed output ((d_s, d_s), like
    the last layer's HTA ``c_last``)."""
    check(tuple(c_sum.shape) == tuple(c_last.shape), f"c_sum should be {tuple(c_last.shape)} (hidden x input)")
    rows = torch.isfinite(c_sum).all(-1)  # 0/0 where the summed output does not move (a flat LN gain)
    check(bool((c_sum[rows] >= 0).all()), "c_sum holds norms: none is negative")
    ones = torch.ones(int(rows.sum()), dtype=torch.float64)
    check(torch.allclose(c_sum[rows].double().sum(-1), ones, atol=1e-6), "each row of c_sum should sum to 1, like c")


def probes_error(median_error: Mapping[int, float]) -> None:
    """Exercise 6.3: the median estimator error with 4, 16 and 64 probes."""
    check(set(median_error) == {4, 16, 64}, f"median_error needs the keys 4, 16 and 64, not {sorted(median_error)}")
    check(all(0 < v < 1 for v in median_error.values()), "a median relative error lies between 0 and 1")
    check(median_error[64] < median_error[4], "more probes should bring the median error down")


def top_contributors(others, c_last: torch.Tensor) -> None:
    """Exercise 6.4: the hidden tokens of the last layer (``c_last``, (d_s, d_s)) whose largest contributor
    is another token."""
    n, top = c_last.shape[0], c_last.argmax(-1)
    check(all(0 <= int(k) < n for k in others), f"others should hold positions 0 to {n - 1}")
    check(all(int(top[int(k)]) != int(k) for k in others), "a position in others has its own token on top")
    missing = int((top != torch.arange(n)).sum()) - len(set(map(int, others)))
    check(missing == 0, "a hidden token whose largest contributor is another one is missing")


# --- 7. Head width ------------------------------------------------------------------------------------------


def null_dims_by_width(null_dims: Mapping[int, list[int]], ratios: Sequence[float]) -> None:
    """Exercise 7.1: per head width d_v (16, 32, 64) the generic dim LN([T, 1]) at each ratio's input length."""
    from ..studies.head_width import ratio_lengths

    check(set(null_dims) == {16, 32, 64}, f"null_dims should have the keys 16, 32 and 64, not {sorted(null_dims)}")
    for d, dims in null_dims.items():
        lengths = ratio_lengths(d, ratios)
        check(len(dims) == len(lengths), f"null_dims[{d}] should hold one count per ratio ({len(lengths)})")
        for r, n, k in zip(ratios, lengths, dims, strict=True):
            check(k == max(0, n - d - 1), f"d_v = {d}, ratio {r:g}: {k} is not the generic count there")


# --- 10. Which measure to trust -----------------------------------------------------------------------------


def distance_baseline_by_hand(baseline) -> None:
    """Exercise 10.1: the distance-only baseline of a 5-token sentence."""
    from ..contributions.agreement import distance_baseline

    want = torch.as_tensor(distance_baseline(5, 1)[1])
    got = torch.as_tensor(baseline, dtype=want.dtype)
    check(tuple(got.shape) == (5, 5), f"baseline should be 5 x 5, not {tuple(got.shape)}")
    check(torch.allclose(got.sum(-1), torch.ones(5, dtype=want.dtype)), "each row of baseline should sum to 1")
    check(torch.allclose(got, want), "baseline's rows do not fall with the distance |i - j| as asked")
