"""Chapter 1's words (identifiability.text.model_and_data): each wording, from numbers on each side of the
branch that chooses it."""

from __future__ import annotations

from types import SimpleNamespace as NS

from identifiability.studies.model_and_data import CorpusLengths, ExampleSentence
from identifiability.text import model_and_data as prose

from .test_text import stand_ins_match


def _lm(causal: bool) -> NS:
    return NS(
        adapter=NS(family="bert", causal=causal),
        n_layers=6,
        n_heads=12,
        d_model=384,
        d_v=32,
        d_ff=1536,
        max_positions=512,
        config=NS(vocab_size=30522),
        provenance={"rebuild_rel_error": 1.234e-7},
    )


def test_architecture_table_says_whether_attention_is_causal():
    bidirectional = dict(prose.architecture_table(_lm(False)).itertuples(index=False))
    causal = dict(prose.architecture_table(_lm(True)).itertuples(index=False))
    assert bidirectional["causal (decoder) attention"] == "no" and causal["causal (decoder) attention"] == "yes"
    assert bidirectional["head (value) dimension d_v = d / H"] == 32
    assert bidirectional["rebuild check: max relative error"] == "1.2e-07"


def test_lengths_text_states_the_sample():
    r = NS(
        corpus_sentences=1000,
        sampled=4,
        words=[10, 12, 14, 16],
        mean_tokens=17.25,
        share_longer_than_d_head=0.25,
        d_v=32,
    )
    assert prose.lengths_text(r, "lee") == (
        "**1000** sentences in `lee`; a seeded sample of 4 has 13.0 words and **17.2 tokens** on average "
        "(special tokens included), and **25%** of them are longer than $d_v = 32$ tokens."
    )


def test_example_text_lists_the_tokens():
    r = NS(example="The cat sat.", example_tokens=["[CLS]", "the", "cat", "sat", ".", "[SEP]"])
    assert prose.example_text(r) == "> The cat sat.\n\n**6 tokens:** `[CLS]` `the` `cat` `sat` `.` `[SEP]`"


def test_the_stand_ins_have_the_fields_of_the_study_types():
    lengths = NS(corpus_sentences=1, sampled=1, words=[1], mean_tokens=1.0, share_longer_than_d_head=0.0, d_v=1)
    example = NS(example="a", example_tokens=["a"])
    assert stand_ins_match([(lengths, CorpusLengths), (example, ExampleSentence)]) == []
