"""Every name a chapter imports from the package exists where the chapter imports it from: a downloaded
chapter, a Binder session or a reader's copy of a notebook breaks at its first cell otherwise (a module that
moved, a function renamed)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


def _package_imports(markdown: str) -> list[tuple[str, str | None]]:
    """(module, name) of every ``from identifiability... import name`` and (module, None) of every
    ``import identifiability...`` in the code cells of a MyST notebook (cell options and magics left out)."""
    out: list[tuple[str, str | None]] = []
    for cell in CELL.findall(markdown):
        code = "\n".join(
            "" if line.startswith((":", "%", "!")) else line for line in cell.splitlines()
        )  # keep line numbers
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "identifiability":
                out += [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(a.name, None) for a in node.names if a.name.split(".")[0] == "identifiability"]
    return out


SOURCES = sorted((ROOT / "notebooks").glob("*.md")) + sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_name_a_chapter_imports_exists(source):
    missing = []
    for module, name in _package_imports(source.read_text()):
        try:
            found = importlib.import_module(module)
            if name is not None and not hasattr(found, name):
                importlib.import_module(f"{module}.{name}")  # a submodule imported by name
        except ImportError as e:
            missing.append(f"{module}{'.' + name if name else ''}: {e}")
    assert not missing, missing


def test_the_check_sees_a_moved_module_and_a_missing_name():
    text = "```{code-cell} ipython3\n:tags: [hide-input]\n\nfrom identifiability import stats\n```\n"
    text += "```{code-cell} ipython3\nfrom identifiability.base.stats import no_such_thing\n```\n"
    found = _package_imports(text)
    assert found == [("identifiability", "stats"), ("identifiability.base.stats", "no_such_thing")]
    with pytest.raises(ImportError):
        importlib.import_module("identifiability.stats")  # the old path is gone
    assert not hasattr(importlib.import_module("identifiability.base.stats"), "no_such_thing")


def test_every_chapter_imports_something_of_the_package():
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
    assert chapters and all(_package_imports(p.read_text()) for p in chapters)
