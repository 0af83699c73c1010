"""Token identity on the real embedded model (the folder adds the ``real`` marker)."""

from identifiability import identity as ident
from identifiability.corpora import load_corpus, sample_sentences


def test_real_model_identity(real_lm):
    texts = sample_sentences(load_corpus("lee"), 24, seed=0, tokenizer=real_lm.tokenizer, min_tokens=8, max_tokens=40)
    hs = ident.hidden_states(real_lm, texts, "lee", cache=False, progress=False)
    sp = ident.make_splits(hs, seed=0)
    naive = ident.fit_probes(sp["train"], sp["val"], ident.probe_config("naive"))
    r, _ = ident.evaluate(naive, sp["test"], candidate_sets=("sentence",))
    cos = r[r.lookup == "cos"].sort_values("layer")
    assert cos.rate.iloc[0] == 1.0
    # identity survives: even the identity map finds most tokens at the last layer of the real model
    assert cos.rate.iloc[-1] > 5 * cos.chance.iloc[-1]
