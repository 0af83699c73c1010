"""Token identity on the real embedded model (the folder adds the ``real`` marker)."""

from identifiability import identity as ident
from identifiability.corpus.corpora import load_corpus, sample_sentences


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


def test_position_alone_identifies_many_tokens_of_the_real_model(real_lm):
    """C6's null: x holds the position embedding, so the mean x of a token's position already points to it
    far more often than a uniform guess among its sentence's tokens (the issue measured about a third against
    4% chance): a probe has to beat this, not chance."""
    texts = sample_sentences(load_corpus("lee"), 60, seed=0, tokenizer=real_lm.tokenizer, min_tokens=8, max_tokens=40)
    hs = ident.hidden_states(real_lm, texts, "lee", cache=False, progress=False)
    sp = ident.make_splits(hs, seed=0)
    per_sentence = ident.position_only_by_sentence(sp["train"], sp["test"])
    rate = sum(ok.sum() for ok in per_sentence) / sp["test"].n
    chance = ident.chance_in_sentence(ident.SentenceLayout(sp["test"].sentence, sp["test"].position))
    assert 3 * chance < rate < 0.9
