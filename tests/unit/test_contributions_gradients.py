"""Gradient × input and Integrated Gradients (contributions/gradients.py) on tiny random models: the registry's
contract, the invariants of issue 34 item 2, a one-layer model against Jacobians of the layer written out by
hand, Captum on a scalar target, and IG's completeness."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identifiability.contributions import MEASURES, compute
from identifiability.contributions.gradients import gauss_legendre, grad_input, integrated_gradients, path_attributions
from identifiability.models.load import random_model
from identifiability.models.trace import trace_sentences

from .contributions_by_hand import check_rows, forced_attention, layer_by_hand, with_random_biases

TEXT = "The cat sat on the mat."
STEPS = 8  # enough for the invariants; the quadrature itself is checked against Captum at 32


def _trace(lm):
    return trace_sentences(lm, [TEXT], progress=False)[0]


def test_gradient_measures_keep_the_registry_contract_on_every_family(tiny_any):
    tr = _trace(tiny_any)
    # two nodes suffice for the contract on every family (the quadrature is checked on bert and gpt2 below)
    for c in (grad_input(tiny_any, tr), integrated_gradients(tiny_any, tr, steps=2)):
        check_rows(c, tiny_any.n_layers, tr.n_tokens)
        if tiny_any.adapter.causal:  # h_i never depends on a later x_j
            assert float(c.triu(1).abs().max()) == 0.0
    for name, ref in (("grad_input", "shrikumar2017learning"), ("integrated_gradients", "sundararajan2017axiomatic")):
        m = MEASURES[name]
        assert not m.per_layer and m.kind == "gradient" and m.reference == ref


def test_the_registered_integrated_gradients_runs_with_its_default_steps(tiny_lm):
    tr = _trace(tiny_lm)
    check_rows(compute(tiny_lm, tr, "integrated_gradients"), tiny_lm.n_layers, tr.n_tokens)


def test_one_layer_model_equals_jacobians_of_the_layer_written_out():
    """grad_input: ||J_ij x_j|| with J from reverse mode (float64) of contributions_by_hand.layer_by_hand; IG:
    the same with J averaged over the Gauss-Legendre nodes of the path from the zero baseline (the test's own
    nodes, from numpy; the rule itself is checked against Captum below). Random biases: see
    contributions_by_hand.with_random_biases."""
    lm = with_random_biases(random_model("bert", seed=1, num_hidden_layers=1))
    tr = trace_sentences(lm, ["The cat sat."], progress=False)[0]  # 6 tokens: 384 Jacobian rows per point
    x = tr.x.double()
    n = x.shape[0]

    def jac(point):  # (n, d, n, d): d h_i / d x_j
        return torch.autograd.functional.jacobian(lambda e: layer_by_hand(lm, 0, e), point, vectorize=True)

    def contributions(jbar, diff):
        a = torch.stack([torch.stack([(jbar[i, :, j] @ diff[j]).norm() for j in range(n)]) for i in range(n)])
        return a / a.sum(-1, keepdim=True)

    torch.testing.assert_close(grad_input(lm, tr)[1], contributions(jac(x), x), atol=1e-6, rtol=0)
    nodes, weights = np.polynomial.legendre.leggauss(4)
    jbar = sum(0.5 * w * jac(0.5 * (a + 1.0) * x) for a, w in zip(nodes, weights))
    torch.testing.assert_close(integrated_gradients(lm, tr, steps=4)[1], contributions(jbar, x), atol=1e-6, rtol=0)


def test_identity_attention_gives_the_identity(tiny_lm):
    """With A = I in every head (softmax replaced, contributions_by_hand.forced_attention) h_i depends on x_i
    alone: J_ij = 0 for i != j."""
    tr = _trace(tiny_lm)
    with forced_attention("identity"):
        cs = grad_input(tiny_lm, tr), integrated_gradients(tiny_lm, tr, steps=STEPS)
    for c in cs:
        torch.testing.assert_close(c, torch.eye(tr.n_tokens, dtype=torch.float64).expand_as(c), atol=1e-12, rtol=0)


def test_a_token_no_head_reads_contributes_nothing_to_the_others(tiny_lm):
    tr = _trace(tiny_lm)
    j = 3
    with forced_attention("unread", column=j):
        cs = grad_input(tiny_lm, tr), integrated_gradients(tiny_lm, tr, steps=STEPS)
    others = [i for i in range(tr.n_tokens) if i != j]
    for c in cs:
        assert float(c[:, others, j].abs().max()) == 0.0


# -- a scalar target: Captum, and completeness ---------------------------------------------------------

LAYER, TOKEN = 2, 3  # target: <w, h_TOKEN^LAYER>, a fixed random w


def _direction(lm) -> torch.Tensor:
    return torch.randn(lm.d_model, generator=torch.Generator().manual_seed(0))


def _target_of_x(lm, tr):
    """f(x) = <w, h_i^l> as a function of a batch of x (B, n, d) -> (B,), written without the package's
    from_x: the x module's output swapped by a hook of the test's own."""
    w = _direction(lm)
    ids = tr.input_ids.reshape(1, -1)

    def f(xb: torch.Tensor) -> torch.Tensor:
        hook = lm.adapter.x_module(lm.model).register_forward_hook(lambda _m, _i, _o: xb)
        try:
            batch = ids.expand(xb.shape[0], -1)
            enc = {"input_ids": batch, "attention_mask": torch.ones_like(batch)}
            hidden = lm.model(**enc, output_hidden_states=True).hidden_states[LAYER]
        finally:
            hook.remove()
        return hidden[:, TOKEN] @ w

    return f


def _ours(lm, tr, alphas, weights) -> torch.Tensor:
    w = _direction(lm)
    return path_attributions(lm, tr, lambda h: h[LAYER, TOKEN] @ w, None, alphas, weights)  # (n,)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_captum_agrees_on_a_scalar_target(family):
    from captum.attr import InputXGradient, IntegratedGradients

    lm = with_random_biases(random_model(family, seed=0))
    tr = _trace(lm)
    f, x = _target_of_x(lm, tr), tr.x.unsqueeze(0).clone()
    ig = IntegratedGradients(f).attribute(x, baselines=torch.zeros_like(x), n_steps=32, method="gausslegendre")
    ixg = InputXGradient(f).attribute(x.clone().requires_grad_(True))
    ours_ig = _ours(lm, tr, *gauss_legendre(32))
    ours_ixg = _ours(lm, tr, np.ones(1), np.ones(1))
    scale = float(ig.abs().sum())
    torch.testing.assert_close(ours_ig, ig[0].sum(-1).double(), atol=1e-5 * scale, rtol=0)
    torch.testing.assert_close(ours_ixg, ixg[0].sum(-1).double(), atol=1e-5 * scale, rtol=0)


def test_integrated_gradients_is_complete_on_a_scalar_target():
    """Σ_j IG_j = f(x) - f(x') (Sundararajan et al.'s completeness) within 1e-4 of |f(x) - f(x')| plus 1e-5:
    the 32-point Gauss-Legendre rule's error with float32 arithmetic (measured: 1e-7 relative; 1e-2 with 8
    points). On a tiny model with random biases (contributions_by_hand.with_random_biases): with the all-zero
    biases of its initialisation the same sum is 1e-4 of the gap, because the target jumps within sqrt(eps)
    of the zero baseline."""
    lm = with_random_biases(random_model("bert", seed=0))
    tr = _trace(lm)
    f = _target_of_x(lm, tr)
    with torch.no_grad():
        gap = float(f(tr.x.unsqueeze(0))[0] - f(torch.zeros_like(tr.x).unsqueeze(0))[0])
    total = float(_ours(lm, tr, *gauss_legendre(32)).sum())
    assert abs(total - gap) <= 1e-4 * abs(gap) + 1e-5, (total, gap)
    assert abs(gap) > 1e-2  # a target that moves, so the check means something


def test_the_completeness_gap_per_number_of_steps():
    """completeness_gaps on a tiny model with random biases (where 32 nodes are within 1e-7, test above): the
    gap falls with steps, 32 nodes already meet the bound there, and shares are measured against the most steps.
    On a model whose biases are all zero the gap stays far above it: the quadrature's miss is seen, not hidden."""
    from identifiability.contributions.gradients import COMPLETENESS_BOUND, completeness_gaps

    lm = with_random_biases(random_model("bert", seed=0))
    rows = completeness_gaps(lm, _trace(lm), (2, 32))
    assert [r.steps for r in rows] == [2, 32]
    assert rows[0].gap > 10 * rows[1].gap and rows[1].gap <= COMPLETENESS_BOUND
    assert rows[0].moved > 0.0 and rows[1].moved == 0.0
    flat = random_model("bert", seed=0)  # every bias zero: h(αx) barely moves with α, the path sees nothing
    assert completeness_gaps(flat, _trace(flat), (32,))[0].gap > 0.5
