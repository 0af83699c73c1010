"""Chapters teach: the method in visible cells, plumbing only in short hidden cells, exercises that change
nothing a later cell reads, and no evidence computed in a hidden cell."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

from identifiability.chapters.contract import chapter_sources

SOURCES = chapter_sources()
HIDDEN = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
EXERCISE = {"solution", "check"}
EVIDENCE = ("grouped_ci", "paired_ci", "bootstrap_ci", "Interval(")


def _cells(source: Path) -> list[tuple[set[str], str]]:
    nb = jupytext.read(source)
    return [(set(c.metadata.get("tags", [])), c.source) for c in nb.cells if c.cell_type == "code"]


def _lines(code: str) -> list[str]:
    return [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.stem)
def test_hidden_cells_hold_only_short_plumbing(source):
    long = []
    for tags, code in _cells(source):
        if tags & HIDDEN and not tags & (EXERCISE | {"parameters"}):
            assert not any(e in code for e in EVIDENCE), f"a hidden cell of {source.stem} builds an interval:\n{code}"
            if len(_lines(code)) > 5:
                long.append(code)
    assert not long, f"{source.stem}: hidden cells longer than 5 lines:\n\n" + "\n---\n".join(long)


def _reads_and_writes(code: str) -> tuple[set[str], set[str]]:
    """Names a cell reads before it assigns them, and names it assigns (statement by statement; a loop or
    comprehension variable is the statement's own)."""
    reads, writes = set(), set()
    for stmt in ast.parse(code).body:
        loads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        stores = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        loops = [n.target for n in ast.walk(stmt) if isinstance(n, ast.For)]
        comps = [n.target for n in ast.walk(stmt) if isinstance(n, ast.comprehension)]
        own = {n.id for t in loops + comps for n in ast.walk(t) if isinstance(n, ast.Name)}
        stores -= {n.id for t in comps for n in ast.walk(t) if isinstance(n, ast.Name)}  # they do not leak
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            stores.add(stmt.name)
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            stores |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        reads |= loads - writes - own
        writes |= stores
    return reads, writes


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.stem)
def test_no_exercise_rebinds_a_name_the_chapter_reads(source):
    """A student reruns cells above an exercise too: the chapter's own cells must not read what it rebinds."""
    rebound: dict[str, int] = {}
    read: dict[str, int] = {}
    for k, (tags, code) in enumerate(_cells(source)):
        reads, writes = _reads_and_writes(code)
        if tags & EXERCISE:
            rebound.update({w: k for w in writes})
        else:
            read.update({r: k for r in reads})
    clashes = [f"{n} (set by exercise cell {rebound[n]}, read by cell {read[n]})" for n in rebound.keys() & read.keys()]
    assert not clashes, f"{source.stem}: an exercise rebinds names that the chapter's cells read: {clashes}"


def test_the_rebinding_check_can_fail():
    reads, writes = _reads_and_writes("g = f(g)\nh = 1\nprint(h, dims)\n[x for x in dims]\nfor t in g: print(t)")
    assert reads == {"f", "g", "print", "dims"} and writes == {"g", "h", "t"}
