"""The teachers' page's courses, written by the build from the chapter contract and the notebooks.

What each chapter teaches (its objectives, what students do in class, what it builds on) is written once, in
:data:`TEACHING`; the exercises are read from the chapters' sources (:func:`exercises`: a numbered bold
heading after ``## Exercises``, then its solution cell, tagged ``solution``); the run times are those the
build measured. :func:`write_course` puts a short and a full course, the exercise list and which chapter
needs which into the staged ``book/teachers.md`` at :data:`COURSE_MARKER`, so the page cannot disagree with
the notebooks it describes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..chapters.contract import CHAPTERS, ChapterSpec, by_name
from .handout import SOLUTION
from .pages import measured_seconds

COURSE_MARKER = "<!-- courses: written by the build -->"


@dataclass(frozen=True)
class Teaching:
    """What one chapter teaches, for the teachers' page."""

    does: str  # what students do in class, one line
    objectives: tuple[str, ...]  # each completes "students can ..."
    minutes: int  # class time, exercises included
    after: tuple[str, ...] = ()  # the chapters (names) whose ideas it builds on
    background: str = ""  # what it assumes beyond the chapters
    project: str = ""  # a project beyond the exercises
    # titles of the exercises the notebook gives none ({number: title})
    untitled: dict[int, str] = field(default_factory=dict)


TEACHING: dict[str, Teaching] = {
    "model_and_data": Teaching(
        "read the model's quantities $d_s$, $d$, $H$, $d_v$ and its raw attention maps",
        (
            "name the model's dimensions ($d_s$, $d$, $H$, $d_v$) and find them in its configuration",
            "read a raw attention map: a row per query, a column per key, each row summing to 1",
            "say which sentences of a text are longer than $d_v$, the length chapter 2's argument needs",
        ),
        60,
        background="Python and PyTorch tensors; matrices and their rank",
    ),
    "nonidentifiability": Teaching(
        "measure the left null space of a head's $T$, build an alternative attention with the same output, "
        "and test the review's two objections",
        (
            "compute the left null space of a head's $T$ and predict its dimension from $d_s$ and $d_v$",
            "construct an attention matrix unlike the model's that gives the same output, and verify it",
            "state the review's threshold $d_s = d_v + 2$ and its softmax-realisability objection, and test both",
        ),
        90,
        after=("model_and_data",),
        background="column and null spaces; least squares",
        untitled={
            1: "The threshold $d_s = d_v + 2$ by hand",
            2: "The full step",
            3: "Softmax realisability at smaller steps",
        },
    ),
    "effective_attention": Teaching(
        "compute effective attention and see where the null part of raw attention goes",
        (
            "project raw attention onto the column space of $T$ (effective attention)",
            "measure how much of raw attention is effective as $d_s$ grows (the paper's Figure 1)",
            "recognise a rank computed with the wrong tolerance",
        ),
        90,
        after=("nonidentifiability",),
    ),
    "token_identity": Teaching(
        "train probes that recover the input token from each layer's hidden embeddings",
        (
            "train a probe from hidden to input embeddings and evaluate it by a nearest-neighbour lookup",
            "read an identifiability rate per layer against chance and the untrained twin",
            "say where the misses land, and fit a linear probe in closed form",
        ),
        90,
        after=("model_and_data",),
        background="least squares; training and test splits",
    ),
    "angle_magnitude": Teaching(
        "separate the direction of hidden embeddings from their length",
        (
            "tell which probe and lookup combinations are scale-free, and why",
            "test whether an embedding's length stands in for its position",
            "measure the angles between input embeddings",
        ),
        75,
        after=("token_identity",),
    ),
    "context_mixing": Teaching(
        "compute Hidden Token Attribution and read what it says about context",
        (
            "compute a hidden token's HTA exactly (Jacobian norms) and estimate it with random probes",
            "read how much of a hidden token is its own input token, and how local its context is",
            "tell HTA from the gradient of a summed output",
        ),
        90,
        after=("model_and_data",),
        background="gradients and Jacobians (reverse mode)",
    ),
    "head_width": Teaching(
        "test whether chapter 2's threshold and chapter 3's offset follow the head's width, on a family of small "
        "trained models (predictions C19–C21)",
        (
            "predict from $d_s$ and $d_v$ where a head first admits an alternative attention",
            "read a claim judged on every member of a family of models",
        ),
        45,
        after=("nonidentifiability", "effective_attention"),
        project="`make family` with other head widths",
    ),
    "explore": Teaching(
        "measure sentences of their own in the explorer, and read on {doc}`claims` which claims hold and by which rule",
        (
            "run the chapters' measurements on a sentence of their own",
            "read a claim's verdict, its rule and its interval",
        ),
        60,
        after=("effective_attention", "context_mixing"),
        project="a rerun on another model ({doc}`rerun`)",
    ),
    "across_models": Teaching(
        "compare the model's token identity with its random-initialisation control (the same architecture with "
        "fresh weights) and, after `make compare`, with its fine-tunes",
        (
            "tell what training changes from what the architecture gives before any training",
            "read one claim's verdicts across models and texts",
        ),
        60,
        after=("token_identity",),
        project="`make compare` on another base model",
    ),
    "measures": Teaching(
        "compute attention rollout by hand, then score every context-mixing measure against exact HTA and an "
        "intervention, beside two nulls",
        (
            "compute attention rollout by hand",
            "score a context-mixing measure against a reference, beside a distance-only null",
            "say which measure to trust for a question about context",
        ),
        75,
        after=("context_mixing",),
        project="`make measures` for the verdicts",
    ),
}

# sessions as tuples of chapter names: the paper's three questions (attention, tokens, context) in four
SHORT_COURSE: tuple[tuple[str, ...], ...] = (
    ("model_and_data", "nonidentifiability"),
    ("effective_attention",),
    ("token_identity",),
    ("context_mixing",),
)
FULL_COURSE: tuple[tuple[str, ...], ...] = tuple((c.name,) for c in CHAPTERS.values())


@dataclass(frozen=True)
class Exercise:
    number: int
    title: str


_HEADING = re.compile(r"^(?:\*\*(\d+)\.\s*(.*?)\*\*|(\d+)\.\s+\*\*(.+?)\*\*)", re.M)


def _exercise(m: re.Match, stem: str, untitled: dict[int, str]) -> Exercise:
    """The exercise a heading match names, its title from the heading or else from ``untitled`` (popped)."""
    number = int(m.group(1) or m.group(3))
    title = (m.group(2) or m.group(4) or "").strip().rstrip(".")
    if title and number in untitled:
        raise ValueError(f"{stem}: exercise {number} has a title; drop its Teaching.untitled entry")
    if not (title or number in untitled):
        raise ValueError(
            f"{stem}: exercise {number} has no title: write **{number}. Title.** in the notebook, or give one in "
            "its Teaching.untitled"
        )
    return Exercise(number, title or untitled.pop(number))


def exercises(source: Path, untitled: Mapping[int, str] | None = None) -> list[Exercise]:
    """The exercises of a chapter's source: each a numbered bold heading (``**1. Title.**`` or
    ``1. **Title.**``) in the ``## Exercises`` section, followed by its solution cell (tagged ``solution``).
    ``untitled``: titles for headings that have none (``**1.**``). ValueError, naming the chapter, when the
    headings and the solutions do not pair one to one, or a heading has no title from either place."""
    import jupytext

    untitled = dict(untitled or {})
    found, solved, inside = [], 0, False
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "markdown":
            section = []  # the cell's lines in the exercises section
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    inside = line.strip() == "## Exercises"
                elif inside:
                    section.append(line)
            found += [_exercise(m, source.stem, untitled) for m in _HEADING.finditer("\n".join(section))]
        elif SOLUTION in cell.metadata.get("tags", []):
            solved += 1
            if solved > len(found):
                raise ValueError(f"{source.stem}: solution {solved} has no numbered exercise heading above it")
    if solved != len(found) or [e.number for e in found] != list(range(1, len(found) + 1)):
        raise ValueError(
            f"{source.stem}: exercises {[e.number for e in found]} and {solved} solution cells do not pair "
            "(number them 1, 2, ... each followed by one cell tagged solution)"
        )
    if untitled:
        raise ValueError(f"{source.stem}: Teaching.untitled names exercises it does not have: {sorted(untitled)}")
    return found


def chapter_exercises() -> dict[str, list[Exercise]]:
    """{chapter name: its exercises} for every chapter of the contract."""
    return {c.name: exercises(c.source, teaching(c).untitled) for c in CHAPTERS.values()}


def teaching(spec: ChapterSpec) -> Teaching:
    if spec.name not in TEACHING:
        raise KeyError(f"{spec.stem} has no entry in identifiability.book.course.TEACHING: write what it teaches")
    return TEACHING[spec.name]


def _number(name: str) -> str:
    return str(int(by_name(name).stem.split("_", 1)[0]))


def _doc(name: str) -> str:
    return f"{{doc}}`../notebooks/{by_name(name).stem}`"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "not run in this build"
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _prerequisites(session: tuple[str, ...], taught: dict[str, int]) -> str:
    """The chapters a session builds on (with the session that teaches them, or "read it first"), then what it
    assumes beyond the chapters."""
    needs, seen = [], set(session)
    for name in session:
        for before in TEACHING[name].after:
            if before not in seen:
                seen.add(before)
                where = f"session {taught[before]}" if before in taught else "read it first"
                needs.append(f"chapter {_number(before)} ({where})")
    needs += [TEACHING[n].background for n in session if TEACHING[n].background]
    return "; ".join(needs) or "—"


def session_table(course: tuple[tuple[str, ...], ...], seconds: Mapping[str, float | None]) -> list[str]:
    """A course as a Markdown table: per session its chapters, what it builds on, its exercises, its class
    time and the chapters' run time in this build (``seconds``: {stem: measured seconds or None})."""
    rows = ["| session | chapters | prerequisites | exercises | class | run time in this build |", "|---" * 6 + "|"]
    taught: dict[str, int] = {}
    found = chapter_exercises()
    for k, session in enumerate(course, 1):
        listed = "; ".join(f"{_number(n)}.{e.number} {e.title}" for n in session for e in found[n]) or "none"
        projects = [TEACHING[n].project for n in session if TEACHING[n].project]
        if projects:
            listed += "; project: " + "; ".join(projects)
        measured = [seconds.get(by_name(n).stem) for n in session]
        run = _duration(sum(measured)) if None not in measured else _duration(None)
        minutes = sum(TEACHING[n].minutes for n in session)
        chapters = " and ".join(_doc(n) for n in session)
        rows.append(f"| {k} | {chapters} | {_prerequisites(session, taught)} | {listed} | {minutes} min | {run} |")
        taught.update({n: k for n in session})
    return rows


def chapter_sections() -> list[str]:
    """What each chapter teaches: its objectives, what students do, its exercises, one block per chapter."""
    lines, found = [], chapter_exercises()
    for spec in CHAPTERS.values():
        t = teaching(spec)
        lines += [f"**{_doc(spec.name)}.** Students {t.does}. They can then:", ""]
        lines += [f"- {o};" for o in t.objectives[:-1]] + [f"- {t.objectives[-1]}.", ""]
        if found[spec.name]:
            lines += ["Exercises: " + "; ".join(f"{e.number}. {e.title}" for e in found[spec.name]), ""]
        else:
            lines += ["No exercises" + (f"; project: {t.project}." if t.project else "."), ""]
    return lines


def dependencies() -> str:
    """Which chapter builds on which (:attr:`Teaching.after`) and which reads another's results or cache
    (the contract's ``reads``), every chapter named."""
    said = []
    for spec in CHAPTERS.values():
        n, t = _number(spec.name), TEACHING[spec.name]
        after = [f"chapter {_number(a)}" for a in t.after]
        text = f"chapter {n} builds on {' and '.join(after)}" if after else f"chapter {n} comes first"
        reads = [CHAPTERS[s] for s in spec.reads]
        before = list(CHAPTERS)[: list(CHAPTERS).index(spec.stem)]
        if len(reads) > 1 and set(spec.reads) == set(before):
            text += ", and reads the results of every chapter before it, so it runs after them"
        elif reads:
            text += f", and reads the cache of chapter {' and '.join(_number(r.name) for r in reads)}, so runs after it"
        said.append(text)
    return "; ".join(said).capitalize() + "."


def course_text(seconds: Mapping[str, float | None]) -> str:
    """The page's courses section (Markdown): the short and the full course, each chapter's objectives and
    exercises, and which chapter needs which."""
    full = sum(TEACHING[n].minutes for s in FULL_COURSE for n in s)
    lines = [
        f"### A short course: {len(SHORT_COURSE)} sessions",
        "",
        "The paper's three questions: whether attention is identifiable (chapters 1 to 3), whether tokens are "
        "(chapter 4), and how hidden tokens mix their context (chapter 6).",
        "",
        *session_table(SHORT_COURSE, seconds),
        "",
        f"### The full course: {len(FULL_COURSE)} sessions",
        "",
        f"One chapter a session, {full / 60:.0f} hours of class in all.",
        "",
        *session_table(FULL_COURSE, seconds),
        "",
        "### What each chapter teaches",
        "",
        *chapter_sections(),
        "### Which chapter needs which",
        "",
        dependencies(),
    ]
    return "\n".join(lines)


def write_course(stage: Path, notebooks: Path) -> Path:
    """Put :func:`course_text` into the staged ``book/teachers.md`` at :data:`COURSE_MARKER`, with the run
    times of the executed chapters in ``notebooks`` (``<stem>.ipynb``; a chapter without one: not run)."""
    path = stage / "book" / "teachers.md"
    text = path.read_text(encoding="utf-8")
    if COURSE_MARKER not in text:
        raise ValueError(f"{path.name} has lost its marker {COURSE_MARKER!r}")
    seconds = measured_seconds(notebooks, list(CHAPTERS))
    path.write_text(text.replace(COURSE_MARKER, course_text(seconds)), encoding="utf-8")
    return path
