"""Integration tier: the same checks on the real embedded model (all-MiniLM-L6-v2)."""

from identifiability import nullspace as ns
from identifiability.models import trace


def test_real_head_is_realisable_and_nonidentifiable(real_lm):
    from identifiability.corpus.corpora import load_corpus

    text = ns.text_of_length(load_corpus("lee"), 40, real_lm.tokenizer, seed=0)
    with ns.float64(real_lm):
        tr = trace.trace_batch(real_lm, [text])[0]
    assert tr.n_tokens == 40
    w_o = trace.out_proj_weights(real_lm).double()
    a, t = tr.attentions[2, 0], tr.values[2, 0] @ w_o[2, 0]
    assert ns.realisability(a, real_lm.d_v).realisable  # the real attention passes the exact test
    me = ns.max_entropy_alternative(a, t, real_lm.d_v)
    assert ns.rel_output_error(a, me["a_alt"], t) < 1e-10 and float(ns.tv_rows(a, me["a_alt"]).mean()) > 1e-4
