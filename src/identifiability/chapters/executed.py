"""A chapter's parameters cell, and its executed notebook made fit for a page and a download.

- :func:`cell_parameters` is the one reader of a parameters cell (``name = value`` lines): the chapter
  contract reads a source's declared defaults with it, the book build the values a chapter ran with.
- :func:`clean_executed` runs on every executed chapter (:func:`identifiability.chapters.execution.run_notebook`):
  papermill's injected ``# Parameters`` cell is merged into the cell tagged ``parameters`` (so the page
  shows one parameters cell with the values used, and a reader who changes ``model`` there really changes
  it), stderr output (progress bars, warnings) is removed, and papermill's bookkeeping (a full copy of the
  source notebook, per-cell timestamps) is dropped.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

PARAMETERS = "parameters"  # the tag of a chapter's parameters cell
INJECTED = "injected-parameters"
# Parameters that say where this build filed its results, not what was computed: a download keeps the
# declared default ("" = data/results/<model>/<corpus>), so a reader who changes ``model`` gets a new folder.
BUILD_LOCATION = ("results_dir",)


def assignments(source: str) -> dict[str, list[ast.expr]]:
    """Top-level ``name = value`` statements of a cell: name -> the value nodes (in order)."""
    out: dict[str, list[ast.expr]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def cell_parameters(source: str) -> dict:
    """{name: value} of a parameters cell's source, each name's last assignment. A value that is not a Python
    literal is kept as its source text.

    Read with ``ast`` rather than papermill's line-based inspector, which drops a parameter whose comment
    contains ``=`` (so a valid ``-p`` value would be ignored without a word).
    """
    out = {}
    for name, nodes in assignments(source).items():
        try:
            out[name] = ast.literal_eval(nodes[-1])
        except ValueError:
            out[name] = ast.get_source_segment(source, nodes[-1])
    return out


def cell_comments(source: str) -> dict[str, str]:
    """{name: its help} of a parameters cell: the comment lines right above a ``name = value`` statement and
    the comment at the end of its last line, joined (names without a comment are left out). The page "This
    build" shows them beside each value, so the help lives once, in the cell."""
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    out = {}
    for stmt in ast.parse(source).body:  # the statement, not its value: a value in brackets ends earlier
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else target
        if not isinstance(target, ast.Name):
            continue
        above, k = [], stmt.lineno - 1
        while k >= 1 and lines[k - 1].lstrip().startswith("#") and k in comments:
            above.insert(0, comments[k])
            k -= 1
        parts = [*above, *([comments[stmt.end_lineno]] if stmt.end_lineno in comments else [])]
        if parts:
            out[target.id] = "; ".join(parts)
        else:
            out.pop(target.id, None)
    return out


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _tagged(cell: dict, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset of (1-based line, UTF-8 byte column) in the text made of ``lines``."""
    line = lines[lineno - 1]
    return sum(len(x) for x in lines[: lineno - 1]) + len(line.encode()[:col].decode())


def merge_parameters(nb: dict) -> dict:
    """Write the values of papermill's injected cell into the cell tagged ``parameters`` and remove the
    injected cell (in place). Each value replaces the declared one on its own line, so the line's comment
    stays; a name the cell does not declare is appended. Names in :data:`BUILD_LOCATION` keep their
    declared default. A notebook without an injected cell is returned unchanged."""
    cells = nb["cells"]
    injected = next((i for i, c in enumerate(cells) if _tagged(c, INJECTED)), None)
    target = next((i for i, c in enumerate(cells) if _tagged(c, PARAMETERS)), None)
    if injected is None:
        return nb
    if target is None:  # nothing to merge into: the injected cell becomes the parameters cell
        cells[injected]["metadata"]["tags"] = [PARAMETERS]
        return nb
    given_src = _source(cells[injected])
    given = {name: ast.get_source_segment(given_src, nodes[-1]) for name, nodes in assignments(given_src).items()}
    source = _source(cells[target])
    lines = source.splitlines(keepends=True)
    declared = assignments(source)
    edits = []
    for name, value in given.items():
        if name in BUILD_LOCATION:
            continue
        for node in declared.get(name, []):
            start = _offset(lines, node.lineno, node.col_offset)
            end = _offset(lines, node.end_lineno, node.end_col_offset)
            edits.append((start, end, value))
    for start, end, value in sorted(edits, reverse=True):
        source = source[:start] + value + source[end:]
    extra = [f"{n} = {v}" for n, v in given.items() if n not in declared and n not in BUILD_LOCATION]
    if extra:
        source = source.rstrip("\n") + "\n" + "\n".join(extra)
    cells[target]["source"] = source
    del cells[injected]
    return nb


def clean_notebook(nb: dict) -> dict:
    """Merge the injected parameters, drop stderr output and papermill's bookkeeping (in place)."""
    merge_parameters(nb)
    for cell in nb["cells"]:
        meta = cell.get("metadata", {})
        for key in ("papermill", "execution"):
            meta.pop(key, None)
        if cell["cell_type"] == "code":
            cell["outputs"] = [
                o for o in cell.get("outputs", []) if not (o["output_type"] == "stream" and o.get("name") == "stderr")
            ]
    pm = nb.get("metadata", {}).get("papermill")
    if pm is not None:  # keep what was run and how long it took; input_path held a full copy of the source
        nb["metadata"]["papermill"] = {k: pm[k] for k in ("parameters", "duration") if k in pm}
    return nb


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_notebook(nb: dict, path: Path, compact: bool = False) -> None:
    """Write ``nb`` as Jupyter does (indented, sorted keys), or ``compact`` (one line: Jupyter indents it
    again on save)."""
    if compact:
        text = json.dumps(nb, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(nb, ensure_ascii=False, indent=1, sort_keys=True)
    Path(path).write_text(text + "\n", encoding="utf-8")


def clean_executed(path: Path) -> Path:
    """:func:`clean_notebook` on an executed ``.ipynb`` file, rewritten in place."""
    write_notebook(clean_notebook(read_notebook(path)), path)
    return path


def parameters_used(path: Path) -> dict | None:
    """{name: value} of the parameters cell of an executed (cleaned) chapter, None if there is none: the
    values it ran with (:func:`cell_parameters`)."""
    if not Path(path).exists():
        return None
    cell = next((c for c in read_notebook(path)["cells"] if _tagged(c, PARAMETERS)), None)
    return None if cell is None else cell_parameters(_source(cell))


def run_seconds(nb: dict) -> float | None:
    """How long papermill took to execute the notebook (None when it was not executed by papermill)."""
    return nb.get("metadata", {}).get("papermill", {}).get("duration")
