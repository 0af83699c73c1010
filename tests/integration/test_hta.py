"""Hidden Token Attribution on the real embedded model: the folded pass against rows of the naive
reference, and the estimator's stated error."""

import torch

from identifiability import hta as attribution


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_real_model_exact_against_naive_rows(real_lm):
    """On the embedded MiniLM, a few rows of S by the naive loop (each row is d backward passes)."""
    text = "The dog barked."
    exact = attribution.hta(real_lm, text)
    assert exact.method == "folded"
    rows = [(real_lm.n_layers, 1)]  # one row of the last layer: d backward passes through the whole model
    ref = attribution.hta_naive(real_lm, text, rows=rows)
    assert torch.isnan(ref.S[0]).all()  # the rows not asked for are left out, not zero
    for layer, i in rows:
        assert rel(exact.S[layer, i], ref.S[layer, i]) <= 1e-4


def test_real_model_estimator_error_bound(real_lm):
    """The stated error (identifiability.hta.estimator, chapter 6): with 16 orthonormal probes per token,
    median relative error of c about 2.5–3.5% and 95th percentile about 10–12% on real sentences; asserted
    with a margin on a fixed seed."""
    text = "Hundreds of people have been forced to vacate their homes."
    exact = attribution.hta(real_lm, text)
    est = attribution.hta(real_lm, text, mode="estimate", probes=16, seed=0)
    err = attribution.estimate_error([exact], [est])
    assert err["median"] <= 0.04 and err["p95"] <= 0.13
    assert err["top_agreement"] >= 0.95
