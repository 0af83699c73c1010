"""Text by name: embedded corpora that need no network, a user's file, or GLUE via ``datasets``.

- ``lee``: 300 Australian news articles from the gensim wheel, split into sentences (the default; the
  closest installable stand-in for the paper's MRPC news sentences).
- ``lee_test``: the 50 further Lee articles (lee.cor).
- ``polarity``: 200 lower-cased movie-review sentences labelled pos/neg.
- ``lee_pairs``: sentence pairs from the held-out Lee articles (:func:`lee_pair_examples`), half a sentence
  and the next one of its article (label ``next``), half a sentence and one of another article (``other``).
- ``lee_heldout``: the single sentences of those held-out articles.
- ``glue/<task>`` (e.g. ``glue/mrpc``): through the ``datasets`` library, only where a network or cache allows.
- a path to a UTF-8 text file: one sentence per line.

A sentence pair is one string, the two sentences joined by :data:`PAIR_SEP` (``" ||| "``), so that it
flows through every function that takes sentences; :func:`encode` (which ``trace.tokenize`` uses)
tokenises it as a pair: the family's own pair template (two [SEP] for some families) and segment ids
(``token_type_ids``). A line ``first ||| second`` of a text file is a pair too; a line with ``|||`` that is
not exactly two non-empty halves is refused with its line number.
"""

from __future__ import annotations

import functools
import importlib.util
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..base.errors import UserError

EMBEDDED = {
    "lee": ("lee_background.cor", "articles"),
    "lee_test": ("lee.cor", "articles"),
    "polarity": ("pang_lee_polarity.cor", "labelled"),
    "lee_pairs": ("lee_background.cor", "pairs"),
    "lee_heldout": ("lee_background.cor", "heldout"),
}
PAIR_SEP = " ||| "
# The Lee articles are split into a training and a held-out part (see :func:`is_held_out`) by a rule anyone
# can recompute, fixed whatever the training seed.
HELD_OUT_EVERY = 3
PAIR_SEED = 0  # the negatives' draw; fixed so that ``lee_pairs`` is one set of pairs for every model


class CorpusError(UserError, ValueError):
    """A corpus that cannot be read or sampled as asked; the message says what to pass instead."""


@dataclass
class Corpus:
    """Sentences in corpus order (consecutive sentences of an article stay adjacent)."""

    name: str
    sentences: list[str]
    labels: list[str] | None = None
    documents: list[int] = field(default_factory=list)  # article index of each sentence

    def __len__(self) -> int:
        return len(self.sentences)


def _gensim_test_data() -> Path:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("the embedded corpora ship inside the PyPI wheel gensim==4.4.0; install it (make book does)")
    path = Path(spec.submodule_search_locations[0]) / "test" / "test_data"
    if not path.is_dir():
        raise CorpusError(f"{path} is missing: Debian's python3-gensim strips it; install gensim from PyPI")
    return path


# Abbreviations after which a period does not end a sentence in the Lee news text.
_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "no",
    "jan",
    "feb",
    "aug",
    "sept",
    "oct",
    "nov",
    "dec",
    "gen",
    "lt",
    "col",
    "sgt",
    "capt",
    "gov",
    "sen",
    "rep",
    "prof",
    "u.s",
    "u.n",
    "vs",
    "inc",
    "co",
    "corp",
}
_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"']))\s+(?=[\"']?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence splitting (good enough for edited news prose)."""
    out: list[str] = []
    for piece in _SPLIT.split(text.strip()):
        piece = piece.strip()
        if not piece:
            continue
        last = out[-1].rsplit(" ", 1)[-1].rstrip(".").lower() if out else ""
        if out and (last in _ABBREV or len(last) == 1):  # "Mr. Smith", "J. Howard"
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def join_pair(a: str, b: str) -> str:
    """Two sentences as one pair string (see the module docstring)."""
    return f"{a.strip()}{PAIR_SEP}{b.strip()}"


def split_pair(text: str) -> tuple[str, str | None]:
    """(first, second) of a pair string; (text, None) for a single sentence."""
    a, sep, b = text.partition(PAIR_SEP)
    return (a, b) if sep else (text, None)


def encode(tokenizer, texts: Sequence[str], **kwargs) -> dict:
    """``tokenizer(texts, **kwargs)`` with every pair string passed as a (first, second) pair, so the
    tokenizer applies its own pair template and segment ids; single sentences are passed unchanged."""
    items = [t if b is None else (t, b) for t, b in map(split_pair, texts)]
    return tokenizer(items, **kwargs)


@dataclass(frozen=True)
class PairExample:
    """One labelled Lee sentence pair: ``label`` 1 when ``b`` is the sentence after ``a`` in its article."""

    a: str
    b: str
    label: int
    article_a: int
    article_b: int


@functools.cache
def _story_of_article() -> tuple[int, ...]:
    """For each Lee background article, the smallest index of the articles it shares a sentence with,
    directly or through others: the corpus repeats some stories whole or in part (85 sentences occur in
    more than one article), and a story must not lie on both sides of the split."""
    lee = load_corpus("lee")
    root = list(range(max(lee.documents) + 1))

    def find(i: int) -> int:
        while root[i] != i:
            i = root[i]
        return i

    first: dict[str, int] = {}
    for sentence, doc in zip(lee.sentences, lee.documents):
        a, b = find(first.setdefault(sentence, doc)), find(doc)
        root[max(a, b)] = min(a, b)
    return tuple(find(i) for i in range(len(root)))


def is_held_out(article: int) -> bool:
    """Whether Lee background article ``article`` belongs to the held-out split: its story (the articles
    that share sentences with it) starts at an article i with i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1."""
    return _story_of_article()[article] % HELD_OUT_EVERY == HELD_OUT_EVERY - 1


def lee_pair_examples(held_out: bool) -> list[PairExample]:
    """The balanced pair set of one article split of ``lee_background.cor``.

    For each sentence with a successor in its article: the pair (sentence, next sentence), label 1, then
    (sentence, a sentence drawn from another article of the same split), label 0. Both sentences of every
    pair come from the split's articles, so no article is on both sides of the split.
    """
    lee = load_corpus("lee")
    idx = [i for i, doc in enumerate(lee.documents) if is_held_out(doc) == held_out]
    rng = random.Random(PAIR_SEED)
    out = []
    for i, j in zip(idx, idx[1:]):
        if lee.documents[i] != lee.documents[j]:
            continue
        doc = lee.documents[i]
        out.append(PairExample(lee.sentences[i], lee.sentences[j], 1, doc, doc))
        k = rng.choice(idx)
        while lee.documents[k] == doc:
            k = rng.choice(idx)
        out.append(PairExample(lee.sentences[i], lee.sentences[k], 0, doc, lee.documents[k]))
    return out


def load_corpus(name: str = "lee") -> Corpus:
    """Load a corpus by name or file path (see the module docstring for the names)."""
    if name in EMBEDDED:
        fname, kind = EMBEDDED[name]
        if kind == "pairs":
            ex = lee_pair_examples(held_out=True)
            labels = ["next" if e.label else "other" for e in ex]
            return Corpus(name, [join_pair(e.a, e.b) for e in ex], labels, [e.article_a for e in ex])
        if kind == "heldout":
            lee = load_corpus("lee")
            keep = [i for i, doc in enumerate(lee.documents) if is_held_out(doc)]
            return Corpus(name, [lee.sentences[i] for i in keep], None, [lee.documents[i] for i in keep])
        lines = (
            (_gensim_test_data() / fname).read_text(encoding="latin-1").splitlines()
        )  # lee.cor has a stray £ in latin-1
        if kind == "labelled":
            labels, sents = [], []
            for line in lines:
                label, _, text = line.partition(" ")
                labels.append(label.removeprefix("__label__"))
                sents.append(text.strip())
            return Corpus(name, sents, labels, list(range(len(sents))))
        sents, docs = [], []
        for i, line in enumerate(lines):
            for s in split_sentences(line):
                sents.append(s)
                docs.append(i)
        return Corpus(name, sents, None, docs)
    if name.startswith("glue/"):
        return _load_glue(name)
    path = Path(name).expanduser()
    if path.is_file():
        sents = [_line(s, path, i) for i, s in enumerate(read_text_file(path).splitlines(), 1) if s.strip()]
        if not sents:
            raise CorpusError(f"text file {path} has no sentences: put one sentence per line")
        return Corpus(path.stem, sents, None, list(range(len(sents))))
    raise CorpusError(
        f"unknown corpus {name!r}: use one of {', '.join(EMBEDDED)}, 'glue/<task>' (needs network or cache), "
        "or the path of a text file with one sentence per line"
    )


def _line(line: str, path: Path, number: int) -> str:
    """One line of a text file as a sentence, or as a pair string when it holds ``|||``: exactly two non-empty
    halves (spaces around ``|||`` optional); CorpusError naming the line otherwise, rather than a sentence
    with a literal ``|||`` in it."""
    if "|||" not in line:
        return line.strip()
    parts = [part.strip() for part in line.split("|||")]
    if len(parts) != 2 or not all(parts):
        raise CorpusError(
            f"{path}, line {number}: {line.strip()[:60]!r} is not a pair: write 'first sentence ||| second "
            "sentence' (one '|||', text on both sides), or a single sentence without '|||'"
        )
    return join_pair(*parts)


def read_text_file(path: Path) -> str:
    """A user's text file as UTF-8 text; one-line errors for binary files and other encodings."""
    raw = path.read_bytes()
    if b"\x00" in raw[:65536]:
        raise CorpusError(f"{path} is a binary file, not text: give a UTF-8 text file with one sentence per line")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"{path} is not UTF-8 text (undecodable byte at offset {e.start}): convert it, e.g. "
            f"iconv -f latin1 -t utf-8 {path} > {path.with_suffix('.utf8.txt')}"
        ) from None


def drop_unusable(corpus: Corpus, tokenizer) -> tuple[Corpus, int]:
    """The corpus without lines that tokenise to nothing but special or unknown tokens (emoji, control
    characters, another script), and how many were dropped. Labels and article indices stay aligned."""
    special = set(tokenizer.all_special_ids)
    ids = (
        encode(tokenizer, corpus.sentences, add_special_tokens=False, verbose=False)["input_ids"] if len(corpus) else []
    )
    keep = [i for i, row in enumerate(ids) if any(t not in special for t in row)]
    if len(keep) == len(corpus):
        return corpus, 0
    labels = [corpus.labels[i] for i in keep] if corpus.labels is not None else None
    docs = [corpus.documents[i] for i in keep] if corpus.documents else []
    return Corpus(corpus.name, [corpus.sentences[i] for i in keep], labels, docs), len(corpus) - len(keep)


def _load_glue(name: str) -> Corpus:
    task = name.split("/", 1)[1]
    try:
        import datasets  # optional: not installed by default
    except ImportError as e:
        raise CorpusError(f"{name!r} needs the `datasets` package and a network or cache (pip install datasets)") from e
    try:
        ds = datasets.load_dataset("glue", task, split="train")
    except Exception as e:  # network errors come in many types
        raise CorpusError(f"cannot load {name!r} (offline, or not cached); use 'lee' or a text file instead") from e
    col = "sentence1" if "sentence1" in ds.column_names else "sentence"
    return Corpus(name.replace("/", "_"), list(ds[col]), None, list(range(len(ds))))


def sample_sentences(
    corpus: Corpus,
    n: int,
    seed: int = 0,
    tokenizer=None,
    min_tokens: int = 1,
    max_tokens: int | None = None,
) -> list[str]:
    """``n`` sentences drawn without replacement by ``seed``, keeping those whose token count (special
    tokens included, if a tokenizer is given; else words) lies in [min_tokens, max_tokens]."""
    if n < 1:
        raise CorpusError(f"n_sentences must be at least 1, got {n}")
    lengths = token_lengths(corpus.sentences, tokenizer)
    keep = [i for i, k in enumerate(lengths) if k >= min_tokens and (max_tokens is None or k <= max_tokens)]
    if not keep:
        raise CorpusError(
            f"no sentence of {corpus.name!r} has between {min_tokens} and {max_tokens} tokens; widen the length filter"
        )
    rng = random.Random(seed)
    chosen = sorted(rng.sample(keep, min(n, len(keep))))
    return [corpus.sentences[i] for i in chosen]


def token_lengths(sentences: list[str], tokenizer=None) -> list[int]:
    """Tokens per sentence, special tokens included (words, without a tokenizer)."""
    if tokenizer is None or not sentences:
        return [sum(len(part.split()) for part in split_pair(s) if part) for s in sentences]
    return [len(ids) for ids in encode(tokenizer, sentences, add_special_tokens=True, verbose=False)["input_ids"]]


def concatenated_inputs(corpus: Corpus, lengths: list[int], tokenizer, seed: int = 0) -> list[str]:
    """Texts of (close to) the requested token lengths, made by joining consecutive sentences of one
    article (or of the corpus, for corpora without articles), then trimming words from the end.

    Used to reach sequence lengths far above a head's dimension with real, coherent text.
    """
    rng = random.Random(seed)
    out = []
    n = len(corpus.sentences)
    for target in lengths:
        start = rng.randrange(n)
        words: list[str] = []
        i = start
        # verbose=False: the texts pass the model's maximum on the way, which is fine here (never fed to it).
        while len(tokenizer(" ".join(words), verbose=False)["input_ids"]) < target and i < start + n:
            words += corpus.sentences[i % n].split()
            i += 1
        # Drop words until the tokenised length fits; a word may be several tokens.
        while len(tokenizer(" ".join(words), verbose=False)["input_ids"]) > target and len(words) > 1:
            words.pop()
        out.append(" ".join(words))
    return out


def long_texts(corpus: Corpus, tokenizer, n: int, min_tokens: int, max_tokens: int, seed: int = 0) -> list[str]:
    """``n`` texts of ``min_tokens``..``max_tokens`` tokens: corpus sentences where there are enough,
    topped up with concatenated consecutive sentences (models with a large d_v need them)."""
    try:
        texts = sample_sentences(corpus, n, seed, tokenizer, min_tokens=min_tokens, max_tokens=max_tokens)
    except ValueError:
        texts = []
    if len(texts) < n:
        rng = np.random.default_rng(seed)
        texts += concatenated_inputs(
            corpus, rng.integers(min_tokens, max_tokens + 1, n - len(texts)).tolist(), tokenizer, seed
        )
    return texts
