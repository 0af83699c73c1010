"""Write the code cells of each chapter (notebooks/*.md, jupytext MyST) as a Python file for ruff.

Usage: python .ci/notebook_code.py OUT_FOLDER. Markdown cells are left out (prose wraps at the page's width,
code at the 80 characters of the book's code box); each cell keeps its jupytext percent marker and tags.
"""

import sys
from pathlib import Path

import jupytext

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for source in sorted(Path("notebooks").glob("*.md")):
    nb = jupytext.read(source)
    nb.cells = [c for c in nb.cells if c.cell_type == "code"]
    jupytext.write(nb, out / f"{source.stem}.py", fmt="py:percent")
