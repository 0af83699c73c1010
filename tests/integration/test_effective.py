"""Integration tier: the same checks on the real embedded model (all-MiniLM-L6-v2)."""

import torch

from identifiability import effective as eff_attn
from identifiability import trace
from identifiability.corpora import concatenated_inputs, load_corpus


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
