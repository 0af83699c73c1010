"""Student and teacher versions of a chapter, made from small notebooks here: from the executed chapter where
there is one (outputs kept, the build's check outputs cleared), never with the cell that saves the results,
and, in a build, linked from the chapter's page above its folded solutions."""

from __future__ import annotations

import json

import jupytext
import nbformat
import pytest

from identifiability.book import handout, render
from identifiability.chapters.contract import chapter_sources


def _code(source: str, tags: list[str], output: str | None = None):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = tags
    if output is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
        cell.execution_count = 1
    return cell


def _chapter(executed: bool = True, save_tags=("remove-cell",)):
    out = (lambda text: text) if executed else (lambda text: None)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A chapter"),
        _code('n_sentences = 3\nresults_dir = ""', ["parameters"]),
        _code("x = 2 + 2\nprint(x)", [], out("4\n")),
        nbformat.v4.new_markdown_cell("## Exercises\n\n**1. Twice.** Store twice x in `y`."),
        _code("y = 2 * x\nprint(y)", ["hide-cell", "solution"], out("8\n")),
        _code(
            'from identifiability.book.handout import needs, passed\n\nneeds(globals(), "y")\npassed("exercise 1")',
            ["remove-cell", "check"],
            out("✓ exercise 1: your answer passes every check\n"),
        ),
        _code("ch.record(runtime_s=1.0)\nch.save()", list(save_tags), out("")),
    ]
    return nb


def _sources(nb) -> str:
    return "\n".join(c.source for c in nb.cells)


def test_a_student_version_of_the_executed_chapter_keeps_outputs_and_hides_the_answer():
    student = handout.student_version(_chapter(), "01_a")
    printed = [o.get("text") for c in student.cells for o in c.get("outputs", [])]
    assert "y = 2 * x" not in _sources(student) and printed == ["4\n"]  # no solution's, no check's output
    ran = next(c for c in student.cells if c.source.startswith("x = 2 + 2"))
    assert ran.outputs[0]["text"] == "4\n"  # the build's outputs are kept
    check = next(c for c in student.cells if "check" in c.metadata.get("tags", []))
    assert check.outputs == [] and "remove-cell" not in check.metadata["tags"]  # shown, with no "passes"
    answer = next(c for c in student.cells if "answer" in c.metadata.get("tags", []))
    assert "reads y" in answer.source
    assert "ch.save()" not in _sources(student)  # a run never writes the book's results
    assert "outputs are those of the book's build" in student.cells[1].source


def test_a_teachers_version_keeps_the_solutions_and_drops_the_save_cell():
    teacher = handout.teacher_version(_chapter(), "01_a")
    solution = next(c for c in teacher.cells if "solution" in c.metadata.get("tags", []))
    assert solution.outputs[0]["text"] == "8\n"
    assert "ch.save()" not in _sources(teacher) and "Teacher's version" in teacher.cells[1].source
    unexecuted = handout.student_version(_chapter(executed=False), "01_a")
    assert "Run the chapter from the top" in unexecuted.cells[1].source


def test_a_save_cell_the_page_shows_is_refused():
    with pytest.raises(ValueError, match="remove-cell"):
        handout.student_version(_chapter(save_tags=("hide-input",)), "01_a")


def test_every_chapter_saves_in_one_hidden_cell_and_folds_its_solutions():
    for source in chapter_sources():
        cells = [c for c in jupytext.read(source).cells if c.cell_type == "code"]
        saves = [c for c in cells if handout.SAVE.search(c.source)]
        assert len(saves) == 1 and "remove-cell" in saves[0].metadata["tags"], source.stem
        for c in cells:
            if "solution" in c.metadata.get("tags", []):
                assert "hide-cell" in c.metadata.get("tags", []), f"{source.stem}: a solution the page does not fold"
        nb = handout.student_version(jupytext.read(source), source.stem)
        assert not handout.SAVE.search(_sources(nb)), source.stem


def _sourced(tmp_path, stem: str):
    """A chapter source of stem ``stem`` (jupytext MyST) and its executed copy in a downloads folder."""
    src = tmp_path / "notebooks" / f"{stem}.md"
    src.parent.mkdir(exist_ok=True)
    jupytext.write(_chapter(executed=False), src, fmt="md:myst")
    downloads = tmp_path / "downloads"
    downloads.mkdir(exist_ok=True)
    nbformat.write(_chapter(), downloads / f"{stem}.ipynb")
    return src, downloads


def test_handouts_are_made_from_the_executed_chapter_where_there_is_one(tmp_path):
    src, downloads = _sourced(tmp_path, "01_a")
    written = handout.write_handouts(tmp_path / "out", [src], executed=downloads)
    assert written == [tmp_path / "out" / "01_a.ipynb", tmp_path / "out" / "teacher" / "01_a.ipynb"]
    outputs = lambda path: [o for c in nbformat.read(path, as_version=4).cells for o in c.get("outputs", [])]  # noqa: E731
    assert [o["text"] for o in outputs(tmp_path / "out" / "01_a.ipynb")] == ["4\n"]
    handout.write_handouts(tmp_path / "fresh", [src], executed=tmp_path / "nowhere")
    assert outputs(tmp_path / "fresh" / "01_a.ipynb") == []  # from the source
    old = _chapter()
    old.cells[5].source = old.cells[5].source.replace("needs(", "check(y == 2 * x)\nneeds(")  # an older check
    nbformat.write(old, downloads / "01_a.ipynb")
    with pytest.warns(UserWarning, match="before a change to the exercises"):
        handout.write_handouts(tmp_path / "stale", [src], executed=downloads)
    assert outputs(tmp_path / "stale" / "01_a.ipynb") == []


def test_a_build_links_each_chapter_page_to_its_student_version(tmp_path):
    src, downloads = _sourced(tmp_path, "01_a")
    pages = tmp_path / "stage"
    pages.mkdir()
    nbformat.write(_chapter(), pages / "01_a.ipynb")
    written = handout.publish(downloads, pages, [src])
    assert written == [downloads / handout.HANDOUTS / "01_a.ipynb"]
    page = json.loads((pages / "01_a.ipynb").read_text())
    text = next(c["source"] for c in page["cells"] if "## Exercises" in "".join(c["source"]))
    text = "".join(text)
    assert 'href="../handouts/01_a.ipynb"' in text and "folded" in text
    assert text.index("## Exercises") < text.index("handouts") < text.index("**1. Twice.**")
    html = tmp_path / "html"
    (html / "_sources" / "notebooks").mkdir(parents=True)
    render.write_downloads(downloads, html)
    assert (html / "handouts" / "01_a.ipynb").is_file()  # where the page's link points
    nb = nbformat.read(html / "handouts" / "01_a.ipynb", as_version=4)
    assert "y = 2 * x" not in _sources(nb)
