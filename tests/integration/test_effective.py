"""Integration tier: the same checks on the real embedded model (all-MiniLM-L6-v2)."""

import dataclasses

import torch

from identifiability.corpus.corpora import concatenated_inputs, load_corpus
from identifiability.effective import projection as eff_attn
from identifiability.models import trace


def test_real_model_invariants(real_lm):
    """The embedded MiniLM: every W_O^h has full rank, LN(T) has dimension d_s - d_v, A_eff T = A T,
    and short sentences keep A_eff = A exactly."""
    w_o = trace.out_proj_weights(real_lm)
    _, wo_rank = eff_attn.out_proj_row_space(w_o)
    assert (wo_rank == real_lm.d_v).all()
    texts = concatenated_inputs(load_corpus("lee"), [20, 60], real_lm.tokenizer, seed=0)
    trs = trace.trace_sentences(real_lm, texts, progress=False)
    for tr, eff in zip(trs, eff_attn.effective_attention(trs, w_o)):
        t = trace.head_transforms(tr, w_o.double())
        out = tr.attentions.double() @ t
        assert float((eff.effective.double() @ t - out).norm() / out.norm()) < 1e-5
        assert (eff.null_dim == max(tr.n_tokens - real_lm.d_v, 0)).all()
        if tr.n_tokens <= real_lm.d_v:
            assert torch.equal(eff.effective, tr.attentions)
        else:
            ref = eff_attn.effective_loop(tr, w_o, dtype=torch.float64)
            torch.testing.assert_close(eff.effective.double(), ref.effective, atol=1e-5, rtol=0)
            assert float(eff_attn.pearson(tr.attentions, eff.effective).median()) < 0.95


def test_real_model_value_bias_and_nulls(real_lm):
    """MiniLM's value biases are not zero: T without b_V gives another A_eff, which keeps A_eff T0 = A T0 for
    its own T0 but not the head's real output A T. The value map applied to value_inputs rebuilds V_h; the
    random value weights give T of full rank d_v on the same inputs."""
    from identifiability.effective import nulls

    w_o = trace.out_proj_weights(real_lm)
    b = nulls.value_bias(real_lm)
    assert float(b.abs().max()) > 1e-2
    texts = concatenated_inputs(load_corpus("lee"), [60], real_lm.tokenizer, seed=0)
    ((_, tr, with_b),) = eff_attn.iter_effective(real_lm, texts, w_o, torch.float64, progress=False)
    ((_, tr0, without),) = eff_attn.iter_effective(real_lm, texts, w_o, torch.float64, progress=False, value_bias=False)
    t, t0 = trace.head_transforms(tr, w_o.double()), trace.head_transforms(tr0, w_o.double())
    a = tr.attentions.double()
    assert float((without.effective @ t0 - a @ t0).norm() / (a @ t0).norm()) < 1e-6
    assert float((without.effective @ t - a @ t).norm() / (a @ t).norm()) > 1e-2
    assert float((with_b.effective @ t - a @ t).norm() / (a @ t).norm()) < 1e-6
    e = nulls.value_inputs(real_lm, tr)
    lin = real_lm.adapter.layer_modules(real_lm.model, real_lm.adapter.value, real_lm.n_layers)
    with torch.no_grad():
        v = torch.stack([real_lm.adapter.split_values(m(e[i][None]), real_lm.n_heads)[0] for i, m in enumerate(lin)])
    torch.testing.assert_close(v, tr.values, atol=1e-4, rtol=1e-4)
    w_v, w_o_rand = nulls.random_value_weights(real_lm, seed=0)
    rand = eff_attn.effective_attention([dataclasses.replace(tr, values=nulls.random_values(e, w_v, b))], w_o_rand)[0]
    assert (rand.rank == real_lm.d_v).all()
