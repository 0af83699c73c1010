"""The teachers' page's courses are written by the build from the contract and the notebooks: every chapter
is taught, every exercise a notebook has is on the page, and the hand-written page holds no session table
that could fall behind."""

from __future__ import annotations

import json
import re

import jupytext
import pytest

from identifiability.base import paths
from identifiability.book import course
from identifiability.book.handout import SOLUTION
from identifiability.chapters.contract import CHAPTERS


def test_every_chapter_has_teaching_text_and_one_session_of_the_full_course():
    assert set(course.TEACHING) == {c.name for c in CHAPTERS.values()}
    assert [n for s in course.FULL_COURSE for n in s] == [c.name for c in CHAPTERS.values()]
    short = [n for s in course.SHORT_COURSE for n in s]
    assert len(course.SHORT_COURSE) == 4 and len(set(short)) == len(short) and set(short) <= set(course.TEACHING)
    for name, t in course.TEACHING.items():
        assert t.objectives and t.does and t.minutes > 0, name
        assert set(t.after) <= set(course.TEACHING) - {name}, name


def _rows(text: str, heading: str) -> dict[str, str]:
    """{session number: its row} of the table under ``heading``."""
    block = text.split(heading, 1)[1].split("###", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| (\d+) \|.*$", block, re.M)}


def test_the_page_lists_every_exercise_of_every_notebook_in_its_session():
    text = course.course_text({})
    full = _rows(text, "### The full course")
    assert len(full) == len(CHAPTERS)
    for k, spec in enumerate(CHAPTERS.values(), 1):
        n = int(spec.stem[:2])
        solutions = sum(SOLUTION in c.metadata.get("tags", []) for c in jupytext.read(spec.source).cells)
        listed = re.findall(rf"\b{n}\.(\d+) ", full[str(k)].split("|")[4])
        assert listed == [str(i) for i in range(1, solutions + 1)], f"{spec.stem}: the page lists {listed}"
        for e in course.exercises(spec.source, course.TEACHING[spec.name].untitled):
            assert f"{n}.{e.number} {e.title}" in full[str(k)], f"{spec.stem}: exercise {e.number} is not listed"
        assert f"hapter {n} " in text.split("### Which chapter needs which", 1)[1], f"{spec.stem}: no dependency"
    short = _rows(text, "### A short course")
    assert len(short) == len(course.SHORT_COURSE)


def test_the_hand_written_page_has_no_table_and_the_build_fills_its_courses(tmp_path):
    source = (paths.source_root() / "book" / "teachers.md").read_text()
    assert "|---" not in source, "a table on the teachers' page is written by the build, not by hand"
    assert not re.search(r"\b(nine|ten|eleven) sessions\b", source, re.I)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "teachers.md").write_text(source)
    (tmp_path / "nb").mkdir()
    stem = next(iter(CHAPTERS))
    nb = {"cells": [], "metadata": {"papermill": {"duration": 150.0}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "nb" / f"{stem}.ipynb").write_text(json.dumps(nb))
    text = course.write_course(tmp_path, tmp_path / "nb").read_text()
    assert course.COURSE_MARKER not in text
    assert re.search(rf"^\| 1 \| {{doc}}`../notebooks/{stem}` \|.*\| 2\.5 min \|$", text, re.M)
    (tmp_path / "book" / "teachers.md").write_text("# T\n")
    with pytest.raises(ValueError, match="marker"):
        course.write_course(tmp_path, tmp_path / "nb")


def _notebook(tmp_path, exercises: str):
    text = (
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "# T\n\n**1. Not an exercise.** Above the exercises.\n\n## Exercises\n\n" + exercises
    )
    path = tmp_path / "01_t.md"
    path.write_text(text)
    return path


SOLVED = "```{code-cell} ipython3\n:tags: [hide-cell, solution]\n\nx = 1\n```\n\n"


def test_exercises_are_read_from_their_headings_and_solutions(tmp_path):
    two = _notebook(tmp_path, f"**1. Where?** Text.\n\n{SOLVED}2. **How long is long.** Text.\n\n{SOLVED}")
    assert course.exercises(two) == [course.Exercise(1, "Where?"), course.Exercise(2, "How long is long")]
    # an exercise added without a solution, or a solution without its heading, fails
    with pytest.raises(ValueError, match="do not pair"):
        course.exercises(_notebook(tmp_path, f"**1. A.** t\n\n{SOLVED}**2. B.** t\n\n"))
    with pytest.raises(ValueError, match="no numbered exercise heading"):
        course.exercises(_notebook(tmp_path, f"**1. A.** t\n\n{SOLVED}{SOLVED}"))
    untitled = _notebook(tmp_path, f"**1.** Text.\n\n{SOLVED}")
    with pytest.raises(ValueError, match="has no title"):
        course.exercises(untitled)
    assert course.exercises(untitled, {1: "Given"}) == [course.Exercise(1, "Given")]
    with pytest.raises(ValueError, match="does not have"):
        course.exercises(untitled, {1: "Given", 2: "Gone"})
