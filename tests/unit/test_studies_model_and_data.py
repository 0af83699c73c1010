"""Chapter 1's studies on a tiny model: lengths counted with special tokens, attention rows that sum to one."""

from __future__ import annotations

import pytest

from identifiability.studies.model_and_data import corpus_lengths, example_sentence


def test_lengths_count_special_tokens_and_compare_with_d_v(tiny_lm):
    sample = ["a b c", "one two three four five six seven eight nine ten eleven twelve thirteen"]
    r = corpus_lengths(tiny_lm, sample, corpus_sentences=10)
    words = [len(tiny_lm.tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sample]
    assert r.tokens == [w + 2 for w in words]  # [CLS] and [SEP]
    assert r.words == [3, 13] and r.sampled == 2 and r.corpus_sentences == 10
    assert r.mean_tokens == pytest.approx(sum(r.tokens) / 2) and r.median_tokens == pytest.approx(r.mean_tokens)
    assert r.share_longer_than_d_head == sum(t > tiny_lm.d_v for t in r.tokens) / 2
    assert set(r.record()) == {
        "corpus_sentences",
        "sampled",
        "mean_tokens",
        "median_tokens",
        "max_tokens_seen",
        "share_longer_than_d_head",
    }


def test_an_empty_sample_is_refused(tiny_lm):
    with pytest.raises(ValueError, match="sample is empty"):
        corpus_lengths(tiny_lm, [], corpus_sentences=0)


def test_example_sentence_attention_rows_are_distributions(tiny_lm):
    r = example_sentence(tiny_lm, "the cat sat on the mat")
    assert r.example_tokens[0] == "[CLS]" and r.example_tokens[-1] == "[SEP]"
    assert r.trace.attentions.shape[-1] == len(r.example_tokens)
    assert r.example_row_sums_max_error < 1e-5
    assert (r.trace.attentions >= 0).all()
