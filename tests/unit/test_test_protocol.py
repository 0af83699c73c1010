"""Tests name chapters by their names and ask the contract for stems, so renumbering a chapter edits the
contract and no test's body (the suite's background lane: tests/integration/test_background_lane.py)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
# A chapter stem spelt out (two digits, an underscore, a name): a test names a chapter by its name and asks the
# contract for its stem (identifiability.chapters.contract.by_name(name).stem).
STEM = re.compile(r"(?<![\w.])\d\d_[a-z][a-z_]*[a-z]\b")
# Test modules whose stems are what they test, each with the reason. A test
# module's own file name may carry its chapter's stem (test_nb_06_context_mixing.py): file names are not scanned.
ABOUT_STEMS = {
    # stems of an earlier build: the renaming map and results filed under old stems
    "unit/test_claims_page.py": "results files under an old stem (chapters.RENAMED)",
    "unit/test_compare.py": "results files under old stems (chapters.RENAMED)",
    # made-up chapters of a made-up contract, or a notebook's stem as the reader types it
    "unit/test_bad_input.py": "what a reader types on the command line, stems and numbers, and the messages",
    # the sweep's chapter selection by number and its folders' layout on disk
    "unit/test_sweep.py": "a sweep's chapter selection by number and the layout of its folders",
    "unit/test_book_build.py": "the book's file layout and toc order, spelt as a reader sees them",
}


def _spelt(text: str) -> list[str]:
    """The stems of the contract's chapters (of now or of an earlier build) spelt in ``text``; a made-up stem
    (a test's unknown chapter) names no chapter."""
    from identifiability.chapters.contract import CHAPTERS, RENAMED

    return [s for s in STEM.findall(text) if s in CHAPTERS or s in RENAMED]


def test_no_test_body_spells_a_chapter_stem():
    found = {}
    for f in sorted(TESTS.rglob("*.py")) + sorted(TESTS.rglob("*.mjs")):
        rel = f.relative_to(TESTS).as_posix()
        if rel in ABOUT_STEMS or rel == "unit/test_test_protocol.py":
            continue
        if spelt := _spelt(f.read_text()):
            found[rel] = sorted(set(spelt))
    assert not found, f"chapter stems spelt in tests (name the chapter: by_name(name).stem): {found}"


def test_the_stem_pattern_finds_stems_and_nothing_else():
    assert _spelt('chapter_run("06_context_mixing") / "notebooks/10_measures.ipynb"') == [
        "06_context_mixing",
        "10_measures",
    ]
    assert not _spelt('by_name("context_mixing") x_06_y 2026_12 v1.06_abc test_nb_06_context_mixing')


def test_the_allow_list_names_existing_modules_that_still_spell_stems():
    for rel in ABOUT_STEMS:
        assert _spelt((TESTS / rel).read_text()), f"{rel} spells no stem now: drop it from the list"
