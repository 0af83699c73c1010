"""Student and teacher versions of the chapters, and the helpers their check cells use.

In a chapter's source (``notebooks/*.md``) each exercise is a Markdown paragraph, then its solution (a code
cell tagged ``solution``; the page folds it away), then a check cell (tagged ``check`` and ``remove-cell``:
the page does not show it, but it runs in every build, right after the solution, so a check that rejects
the reference solution fails the build). A check cell reads the variables it names in ``needs(...)`` and
calls a check of :mod:`identifiability.book.checks`, which tests properties of the answer (shapes,
invariants, agreement with a quantity the chapter computed) without its source showing the answer.

``python -m identifiability.book.handout`` (``make handout``) writes, per chapter with exercises, a student
version (each solution replaced by an empty answer cell that names those variables, the check cells shown)
and a teacher's version (the solutions in place), each made from the chapter the book's build executed
(outputs kept; its downloads folder) where there is one, else from the source. Neither keeps the cell that
saves the chapter's results: a class's runs must never write into the book's results folder, which later
chapters and the claims page read; nothing in a version needs the file, so the cell is dropped rather than
pointed elsewhere. The build writes the student versions beside the downloads and links each from its
chapter page (:func:`publish`).
"""

from __future__ import annotations

import argparse
import re
import warnings
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


HANDOUTS = "handouts"  # the build's folder of student versions, beside the downloads and in the HTML
SAVE = re.compile(r"^\s*ch\.save\(\)", re.M)  # the cell that writes the chapter's results file
_STUDENT = (
    "*Student version: the solutions of the exercises are removed. {how} Write each answer in the empty cell "
    "after its exercise, then run the check cell below it: it tests properties of your answer and says what "
    "is wrong, or that it passes. This version does not save the chapter's results.*"
)
_TEACHER = (
    "*Teacher's version: the chapter with the solutions of its exercises in place, each followed by the check "
    "cell that the student version runs on a student's answer. {how} This version does not save the chapter's "
    "results.*"
)
_EXECUTED = (
    "The outputs are those of the book's build: run the chapter from the top once (the exercises use what it "
    "computes; a cached run is faster), then work on the exercises."
)
_SOURCE = "Run the chapter from the top (the exercises use what it computes)."


def _is_save(cell, chapter: str) -> bool:
    """Whether ``cell`` saves the chapter's results (``ch.save()``): a hidden cell of bookkeeping, or a
    ValueError, since dropping a cell the page shows would drop what it shows."""
    if cell.cell_type != "code" or not SAVE.search(cell.source):
        return False
    if "remove-cell" not in _tags(cell):
        raise ValueError(f"{chapter}: the cell that calls ch.save() must be tagged remove-cell (bookkeeping only)")
    return True


def _version(nb, chapter: str, solutions: bool):
    """The student version (``solutions`` False) or the teacher's version of a chapter notebook (nbformat,
    executed or not): check cells shown, the save cell dropped, an introduction under the title."""
    import nbformat

    nb = nbformat.from_dict(nb)
    for cell in nb.cells:  # a notebook read as JSON keeps each source as a list of lines
        if isinstance(cell.source, list):
            cell.source = "".join(cell.source)
    cells, out, n = nb.cells, [], 0
    executed = any(c.get("outputs") for c in cells if c.cell_type == "code")
    for i, cell in enumerate(cells):
        tags = _tags(cell)
        if _is_save(cell, chapter):
            continue
        if SOLUTION in tags:
            follower = next((c for c in cells[i + 1 :] if c.cell_type == "code"), None)
            if follower is None or CHECK not in _tags(follower):
                raise ValueError(f"{chapter}: the solution cell {i} is not followed by a check cell")
            n += 1
            if solutions:
                out.append(cell)
                continue
            names = needed_names(follower.source)
            answer = nbformat.v4.new_code_cell(
                f"# Exercise {n}: your answer. The check below reads {', '.join(names) or 'your variables'}.\n"
            )
            answer.metadata["tags"] = ["answer"]
            out.append(answer)
        elif CHECK in tags:
            cell.metadata["tags"] = [t for t in tags if t not in ("remove-cell", "remove-input")]
            if not solutions:  # the build's run printed that the solution passes
                cell.outputs, cell.execution_count = [], None
            out.append(cell)
        else:
            out.append(cell)
    if n:
        text = (_TEACHER if solutions else _STUDENT).format(how=_EXECUTED if executed else _SOURCE)
        title = next((j for j, c in enumerate(out) if c.cell_type == "markdown" and c.source.startswith("# ")), -1)
        out.insert(title + 1, nbformat.v4.new_markdown_cell(text))
    nb.cells = out
    return nb


def student_version(nb, chapter: str = ""):
    """A copy of a chapter notebook (nbformat; executed or not) with solutions replaced by empty answer cells,
    check cells shown (without the build's outputs) and the save cell dropped. Raises ValueError if an
    exercise's solution is not followed by a check cell."""
    return _version(nb, chapter, solutions=False)


def teacher_version(nb, chapter: str = ""):
    """A copy of a chapter notebook with its solutions, check cells shown and the save cell dropped."""
    return _version(nb, chapter, solutions=True)


def _exercise_cells(nb) -> list[str]:
    """The sources of a notebook's solution and check cells, in order."""
    cells = nb["cells"] if isinstance(nb, dict) else nb.cells
    texts = [("".join(c["source"]), _tags(c)) for c in cells]
    return [text for text, tags in texts if SOLUTION in tags or CHECK in tags]


def _chapter(source: Path, executed: Path | None):
    """The chapter to make versions of: the executed ``<executed>/<stem>.ipynb`` where it exists and its
    exercises are the source's, else the source (with a warning where the executed one is out of date: its
    check cells would not be the package's checks of now)."""
    import jupytext

    from ..chapters.executed import read_notebook

    nb = jupytext.read(source)
    done = Path(executed) / f"{source.stem}.ipynb" if executed else None
    if done is None or not done.is_file():
        return nb
    ran = read_notebook(done)
    if _exercise_cells(ran) != _exercise_cells(nb):
        warnings.warn(
            f"{done} was executed before a change to the exercises of {source}: its versions are made from the "
            "source, without outputs (run make book for outputs)",
            stacklevel=3,
        )
        return nb
    return ran


def write_handouts(out: Path, sources: list[Path], executed: Path | None = None, teacher: bool = True) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb`` (student versions) and, with ``teacher``, ``<out>/teacher/<chapter>.ipynb``
    for every chapter with exercises, each made from ``<executed>/<chapter>.ipynb`` where there is one with
    the source's exercises (the build's downloads folder: outputs kept), else from its source."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources:
        nb = _chapter(source, executed)
        student = student_version(nb, source.stem)
        if not any(CHECK in _tags(c) for c in student.cells):
            continue
        nbformat.write(student, out / f"{source.stem}.ipynb")
        written.append(out / f"{source.stem}.ipynb")
        if teacher:
            (out / "teacher").mkdir(exist_ok=True)
            nbformat.write(teacher_version(nb, source.stem), out / "teacher" / f"{source.stem}.ipynb")
            written.append(out / "teacher" / f"{source.stem}.ipynb")
    return written


def link_note(href: str) -> str:
    """What a chapter page says above its exercises: solutions folded, and where its student version is."""
    return (
        "*Each solution is folded under its exercise: open it to read it. The "
        f'<a href="{href}" download>student version of this chapter</a> (a notebook: the chapter as this build '
        "ran it, without the solutions, with a check after each exercise) is for working them; "
        "{doc}`../book/teachers` says more.*"
    )


def link_page(nb: dict, href: str) -> bool:
    """Put :func:`link_note` under the ``## Exercises`` heading of a page version (a notebook dict, in place);
    False where the chapter has no such heading."""
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and re.search(r"^## Exercises$", text, re.M):
            cell["source"] = re.sub(r"^## Exercises$", f"## Exercises\n\n{link_note(href)}", text, count=1, flags=re.M)
            return True
    return False


def publish(downloads: Path, pages: Path, sources: list[Path]) -> list[Path]:
    """In a build: write the student version of each chapter in ``downloads`` (the executed chapters) into
    ``<downloads>/handouts/``, and link it from the chapter's page version in ``pages`` (``<stem>.ipynb``),
    which the HTML serves as ``handouts/<stem>.ipynb``."""
    from ..chapters.executed import read_notebook, write_notebook

    ran = [s for s in sources if (Path(downloads) / f"{s.stem}.ipynb").is_file()]
    written = write_handouts(Path(downloads) / HANDOUTS, ran, executed=downloads, teacher=False)
    for path in written:
        page = Path(pages) / path.name
        nb = read_notebook(page)
        if not link_page(nb, f"../{HANDOUTS}/{path.name}"):
            raise ValueError(f"{path.stem} has exercises but no '## Exercises' heading to link its student version")
        write_notebook(nb, page)
    return written


def main(argv: list[str] | None = None) -> int:
    from ..base import paths
    from ..chapters.contract import chapter_sources

    ap = argparse.ArgumentParser(prog="python -m identifiability.book.handout", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("_build") / "handout")
    ap.add_argument(
        "--executed",
        type=Path,
        default=paths.build_root() / "downloads",
        help="the executed chapters (<chapter>.ipynb) to make the versions from: a build's downloads folder",
    )
    a = ap.parse_args(argv)
    warnings.formatwarning = lambda message, *_args, **_kw: f"warning: {message}\n"
    for f in write_handouts(a.out, chapter_sources(), a.executed):
        print(f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
