"""Code a reader sees in a box of the book: every chapter's code cells, and the command blocks of the prose
pages and the README, checked against the width of the box.

Usage: python .ci/notebook_code.py OUT_FOLDER. Writes the code cells of each chapter (notebooks/*.md,
jupytext MyST) as a Python file for ruff (each cell keeps its jupytext percent marker and tags; Markdown
cells are left out: prose wraps at the page's width), then exits 1, naming each line, if a code cell or a
fenced command block of book/*.md or README.md has a line wider than CODE_WIDTH.

CODE_WIDTH was measured in Chromium on built chapter pages at a 1280 px window: a character of the
theme's 14 px monospace font (DejaVu Sans Mono there; Menlo, SF Mono and Source Code Pro are as wide) is
8.43 px; a code cell's box is 684 px wide, 652 px inside its padding (77 characters), and a cell whose
source is folded away (hide-input, a solution) is 666 px, 634 inside: 75 characters, the rule for every
box. At 390 px the boxes scroll sideways inside themselves, never the page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CODE_WIDTH = 75
# a fence that opens a block of code; "```{directive}" (MyST) is not code, except a code cell
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def fenced_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block of Markdown ``text``, MyST directives
    (```{name}) left out except ``code-cell``."""
    out, fence, code = [], None, False
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line.strip())
        if fence is None and m:
            fence, info = m.group(1), m.group(2).strip()
            code = not info.startswith("{") or info.startswith("{code-cell}")
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is not None and code:
            out.append((n, line))
    return out


def too_wide(root: Path, width: int = CODE_WIDTH) -> list[str]:
    """'path:line: N characters' for each line of code in a box wider than ``width``."""
    sources = sorted((root / "notebooks").glob("*.md")) + sorted((root / "book").glob("*.md"))
    sources += [root / "README.md"]
    return [
        f"{path.relative_to(root)}:{n}: {len(line)} characters (the code box holds {width})"
        for path in sources
        for n, line in fenced_lines(path.read_text(encoding="utf-8"))
        if len(line) > width
    ]


def write_cells(root: Path, out: Path) -> None:
    import jupytext

    out.mkdir(parents=True, exist_ok=True)
    for source in sorted((root / "notebooks").glob("*.md")):
        nb = jupytext.read(source)
        nb.cells = [c for c in nb.cells if c.cell_type == "code"]
        jupytext.write(nb, out / f"{source.stem}.py", fmt="py:percent")


if __name__ == "__main__":
    write_cells(Path("."), Path(sys.argv[1]))
    wide = too_wide(Path("."))
    print("\n".join(wide))
    sys.exit(1 if wide else 0)
