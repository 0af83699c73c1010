"""Student versions of the chapters, and the helpers their check cells use.

In a chapter's source (``notebooks/*.md``) each exercise is a Markdown paragraph, then its solution (a code
cell tagged ``solution``; the page folds it away), then a check cell (tagged ``check`` and ``remove-cell``:
the page does not show it, but it runs in every build, right after the solution, so a check that rejects
the reference solution fails the build). A check cell tests properties of the answer (shapes, invariants,
agreement with a quantity the chapter computed) and reads the variables it names in ``needs(...)``.

``python -m identifiability.book.handout --out _build/handout`` (``make handout``) writes, per chapter, the
notebook with each solution replaced by an empty answer cell that names those variables, and the check
cells shown.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

SOLUTION, CHECK = "solution", "check"


class CheckFailed(AssertionError):
    """An answer does not have a property its exercise asks for (the message says which)."""


def needs(namespace: dict, *names: str) -> None:
    """Stop with a one-line message unless the answer cell above defined every variable in ``names``."""
    missing = [n for n in names if n not in namespace]
    if missing:
        raise CheckFailed(f"define {', '.join(missing)} in your answer cell first (then run it, then this check)")


def check(condition, message: str) -> None:
    """Stop with ``message`` unless ``condition`` holds."""
    if not bool(condition):
        raise CheckFailed(message)


def passed(exercise: str) -> None:
    print(f"✓ {exercise}: your answer passes every check")


_NEEDS = re.compile(r"needs\(\s*globals\(\)\s*,([^)]*)\)")


def needed_names(check_source: str) -> list[str]:
    """The variables a check cell reads (the arguments of its ``needs(globals(), ...)`` call)."""
    m = _NEEDS.search(check_source)
    return re.findall(r"[\"'](\w+)[\"']", m.group(1)) if m else []


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def student_version(nb, chapter: str = ""):
    """A copy of a chapter notebook (nbformat) with solutions replaced by empty answer cells and check cells
    shown. Raises ValueError if an exercise's solution is not followed by a check cell."""
    import nbformat

    nb = nbformat.from_dict(nb)
    cells, out, n = nb.cells, [], 0
    for i, cell in enumerate(cells):
        tags = _tags(cell)
        if SOLUTION in tags:
            follower = next((c for c in cells[i + 1 :] if c.cell_type == "code"), None)
            if follower is None or CHECK not in _tags(follower):
                raise ValueError(f"{chapter}: the solution cell {i} is not followed by a check cell")
            n += 1
            names = needed_names(follower.source)
            answer = nbformat.v4.new_code_cell(
                f"# Exercise {n}: your answer. The check below reads {', '.join(names) or 'your variables'}.\n"
            )
            answer.metadata["tags"] = ["answer"]
            out.append(answer)
        elif CHECK in tags:
            cell.metadata["tags"] = [t for t in tags if t not in ("remove-cell", "remove-input")]
            out.append(cell)
        else:
            out.append(cell)
    if n:
        intro = nbformat.v4.new_markdown_cell(
            "*Student version: the solutions of the exercises are removed. Run the chapter from the top (the "
            "exercises use what it computes), write each answer in the empty cell after its exercise, then run "
            "the check cell below it: it tests properties of your answer and says what is wrong, or that it "
            "passes.*"
        )
        title = next((j for j, c in enumerate(out) if c.cell_type == "markdown" and c.source.startswith("# ")), -1)
        out.insert(title + 1, intro)
    nb.cells = out
    return nb


def write_handouts(out: Path, sources: list[Path]) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb`` (unexecuted student versions) for every chapter with exercises."""
    import jupytext
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources:
        nb = student_version(jupytext.read(source), source.stem)
        if not any(CHECK in _tags(c) for c in nb.cells):
            continue
        target = out / f"{source.stem}.ipynb"
        nbformat.write(nb, target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    from ..chapters.contract import chapter_sources

    ap = argparse.ArgumentParser(prog="python -m identifiability.book.handout", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("_build") / "handout")
    a = ap.parse_args(argv)
    for f in write_handouts(a.out, chapter_sources()):
        print(f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
