"""Each exercise's check (identifiability.book.checks) accepts the value its chapter's solution computes and
rejects a wrong one, with a one-line message; inputs are small and made here, the solution's method applied
to them as the notebook applies it to the chapter's quantities."""

from __future__ import annotations

import ast
import math
from types import SimpleNamespace

import jupytext
import pandas as pd
import pytest
import torch

from identifiability.book import checks
from identifiability.book.handout import CHECK, CheckFailed
from identifiability.chapters.contract import chapter_sources


def _rejects(fn, *args) -> str:
    with pytest.raises(CheckFailed) as e:
        fn(*args)
    assert "\n" not in str(e.value)
    return str(e.value)


def _softmax_rows(n_heads: int, n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n_heads, n, n, generator=torch.Generator().manual_seed(seed)).softmax(-1)


def test_model_and_data():
    last, tokens = _softmax_rows(3, 5), ["[CLS]", "a", "b", "a", "[SEP]"]
    peak = last.max(-1).values.mean(-1)
    h = int(peak.argmax())
    key_token = tokens[int(last[h].sum(0).argmax())]
    checks.most_attended(h, key_token, last, tokens)
    _rejects(checks.most_attended, int(peak.argmin()), key_token, last, tokens)
    assert "not a head index" in _rejects(checks.most_attended, -1, key_token, last, tokens)
    other = next(t for i, t in enumerate(tokens) if t != key_token and i != int(last[h].sum(0).argmax()))
    _rejects(checks.most_attended, h, other, last, tokens)
    checks.corpus_share(3 / 10, 40, 10, 35, 32)
    _rejects(checks.corpus_share, 0.33, 40, 10, 35, 32)
    _rejects(checks.corpus_share, 0.0, 40, 10, 35, 32)


def test_nonidentifiability():
    d_v = 8
    dims = {n: max(0, n - d_v - 1) for n in (d_v, d_v + 1, d_v + 2, d_v + 3)}
    checks.null_dimensions(dims, d_v + 2, d_v)
    _rejects(checks.null_dimensions, {n: max(0, n - d_v) for n in dims}, d_v + 1, d_v)
    _rejects(checks.null_dimensions, dims, d_v + 1, d_v)
    checks.full_step([1e-14, 2e-15], [0.0, -1e-17], 2)
    _rejects(checks.full_step, [1e-14, 2e-15], [0.01, 0.0], 2)
    _rejects(checks.full_step, [1e-3, 2e-15], [0.0, 0.0], 2)
    checks.realisability_ranks({0.9: 9, 1e-2: 9, 1e-4: 9}, 8, False)
    _rejects(checks.realisability_ranks, {0.9: 9, 1e-2: 9, 1e-4: 4}, 8, False)
    _rejects(checks.realisability_ranks, {0.9: 9}, 8, False)


def test_effective_attention_by_hand(tiny_lm):
    from identifiability.base.linalg import numerical_rank, rank_rtol
    from identifiability.models.trace import head, out_proj_weights, trace_batch

    texts = [" ".join(["the cat sat on the mat while the dog slept"] * 3)]  # d_s > d_v: a null part
    tr = trace_batch(tiny_lm, texts)[0]
    A, T = head(tr, out_proj_weights(tiny_lm), 1, tiny_lm.n_heads - 1)
    U, s, _ = torch.linalg.svd(T, full_matrices=False)
    U = U[:, : int(numerical_rank(s, rank_rtol(*T.shape, T.dtype)))]
    checks.effective_by_hand(A @ U @ U.T, tiny_lm, texts, "float32")
    assert "A itself" in _rejects(checks.effective_by_hand, A, tiny_lm, texts, "float32")


def test_effective_attention():
    g = torch.Generator().manual_seed(0)
    A, T = torch.randn(6, 6, generator=g).softmax(-1).double(), torch.randn(6, 4, generator=g).double()
    N = torch.linalg.svd(T, full_matrices=True).U[:, 4:]  # left null space of T
    checks.same_output(A + 0.1 * torch.randn(6, 2, generator=g).double() @ N.T, A, T)
    _rejects(checks.same_output, A + 0.1, A, T)
    _rejects(checks.same_output, A, A, T)
    checks.rank_trap(6, 4, 4)
    _rejects(checks.rank_trap, 3, 4, 4)
    _rejects(checks.rank_trap, 6, 5, 4)
    rows = [dict(layer=1 + k // 4, head=k % 4, d_s=d, pearson=k / 10 + d) for k in range(8) for d in (8, 20)]
    table = pd.DataFrame(rows)
    means = table[table.d_s == 20].groupby(["layer", "head"]).pearson.mean()
    checks.least_explained(means.nsmallest(5), table, 20)
    _rejects(checks.least_explained, means.nlargest(5), table, 20)


def test_token_identity():
    n = 20
    checks.lost_tokens(pd.DataFrame({"token": ["a"] * 3, "taken for": ["b"] * 3}), 0.85, n)
    _rejects(checks.lost_tokens, pd.DataFrame({"token": ["a"] * 4, "taken for": ["b"] * 4}), 0.85, n)
    checks.identity_or_position(2, 1, 0.9, n)
    _rejects(checks.identity_or_position, 3, 1, 0.9, n)
    checks.small_probe(0.55, n)
    _rejects(checks.small_probe, 0.553, n)
    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(50, 3, generator=g), torch.randn(50, 3, generator=g)
    E = torch.cat([X, torch.ones(50, 1)], 1).double()
    W = torch.linalg.lstsq(E, Y.double(), driver="gelsd").solution.float()
    train = SimpleNamespace(inputs={2: X}, targets=Y)
    lin = SimpleNamespace(layers=[2], losses=["l2"], probe=SimpleNamespace(forward_one=lambda p, x: x @ W[:3] + W[3]))
    checks.probe_by_hand(W, 0.5, train, lin, 2, n, 0.1)
    _rejects(checks.probe_by_hand, W + 1, 0.5, train, lin, 2, n, 0.1)
    _rejects(checks.probe_by_hand, W, 0.05, train, lin, 2, n, 0.1)


def test_angle_magnitude():
    change = {("naive", "l2", "cos"): 0.0, ("naive", "l2", "l2"): 0.3, ("linear", "l2", "cos"): 0.1}
    checks.scale_free(change)
    _rejects(checks.scale_free, {**change, ("naive", "l2", "cos"): 0.2})
    checks.length_correlations(0.4, -0.1, 30)
    _rejects(checks.length_correlations, 1.4, -0.1, 30)
    checks.cone_angles(70.0, math.nan)
    _rejects(checks.cone_angles, 0.0, 10.0)


def test_context_mixing():
    c = torch.rand(3, 5, 5, generator=torch.Generator().manual_seed(0)).double()
    c = c / c.sum(-1, keepdim=True)
    checks.hta_row_by_hand(c[1, -1].float(), c)
    _rejects(checks.hta_row_by_hand, c[2, -1], c)
    checks.summed_gradient(c[-1], c[-1])
    _rejects(checks.summed_gradient, 2 * c[-1], c[-1])
    checks.probes_error({4: 0.4, 16: 0.2, 64: 0.1})
    _rejects(checks.probes_error, {4: 0.1, 16: 0.2, 64: 0.4})
    top = c[-1].argmax(-1)
    others = [i for i in range(5) if int(top[i]) != i]
    checks.top_contributors(others, c[-1])
    _rejects(checks.top_contributors, others + [i for i in range(5) if i not in others][:1], c[-1])
    if others:
        _rejects(checks.top_contributors, others[1:], c[-1])


def test_head_width_and_measures():
    r = [0.5, 1.0, 1.25, 2.0]
    null_dims = {d: [max(0, round(x * d) - d - 1) for x in r] for d in (16, 32, 64)}
    checks.null_dims_by_width(null_dims, r)
    _rejects(checks.null_dims_by_width, {d: [max(0, round(x * d) - d) for x in r] for d in null_dims}, r)
    idx = torch.arange(5.0)
    baseline = 1 / (1 + (idx[:, None] - idx[None, :]).abs())
    checks.distance_baseline_by_hand(baseline / baseline.sum(-1, keepdim=True))
    _rejects(checks.distance_baseline_by_hand, torch.full((5, 5), 0.2))


def test_every_check_cell_calls_a_check_of_the_package_and_computes_nothing():
    """A check cell reads the answer, calls one check and says it passed: no comparison, arithmetic or
    expected value of its own that a student would read the answer from."""
    for source in chapter_sources():
        for cell in jupytext.read(source).cells:
            if CHECK not in cell.metadata.get("tags", []):
                continue
            tree = ast.parse(cell.source)
            called = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)]
            assert any(isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "checks" for f in called)
            own = [n for n in ast.walk(tree) if isinstance(n, ast.Compare | ast.BinOp | ast.Assign | ast.For)]
            assert not own, f"{source.stem}: a check cell computes in its source:\n{cell.source}"
