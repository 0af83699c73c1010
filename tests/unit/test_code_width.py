"""Code in the book's boxes fits them at 1280 px: every chapter's code cells and the command blocks of the
prose pages and the README (the rule and its measured width: ``.ci/notebook_code.py``, which `make lint`
runs)."""

import importlib.util

import pytest

from identifiability.base import paths

ROOT = paths.source_root()
_spec = importlib.util.spec_from_file_location("notebook_code", ROOT / ".ci" / "notebook_code.py")
notebook_code = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebook_code)


def test_code_blocks_and_cells_are_found_and_directives_are_not():
    text = "\n".join(
        [
            "prose " + "x" * 100,
            "```bash",
            "make book   # " + "y" * 80,
            "```",
            "```{bibliography}",
            ":all: " + "z" * 90,
            "```",
            "````{code-cell} ipython3",
            ":tags: [parameters]",
            "model = 'm'  # " + "w" * 70,
            "````",
        ]
    )
    lines = dict(notebook_code.fenced_lines(text))
    assert set(lines) == {3, 9, 10} and lines[3].startswith("make book")


@pytest.mark.parametrize(
    "source",
    sorted(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("notebooks/*.md"), *ROOT.glob("book/*.md")])
    + ["README.md"],
)
def test_every_line_of_code_fits_the_code_box(source):
    path = ROOT / source
    wide = [
        f"{source}:{n}: {len(line)} > {notebook_code.CODE_WIDTH}: {line.strip()[:60]}"
        for n, line in notebook_code.fenced_lines(path.read_text(encoding="utf-8"))
        if len(line) > notebook_code.CODE_WIDTH
    ]
    assert not wide, "\n".join(wide)
