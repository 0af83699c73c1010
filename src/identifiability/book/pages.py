"""The pages the build writes: this build's model, text and parameters (``book/this_build.md``) and the
chapters' measured run times (``book/teachers.md``); :mod:`identifiability.book.findings` writes the findings
(the introduction's table and ``book/claims.md``).
"""

from __future__ import annotations

from pathlib import Path

from ..base import paths
from ..base.digits import times_ten
from ..base.fileio import read_json
from ..chapters.contract import results_file
from ..chapters.executed import BUILD_LOCATION, PARAMETERS, assignments, cell_comments, read_notebook, run_seconds
from ..chapters.parameters import ALLOWED


def format_value(value) -> str:
    """A parameter or provenance value for people: "—" for none, yes/no, floats to 3 significant digits
    (powers of ten written out), text without quotes."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        text = f"{value:.3g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            return times_ten(mantissa, int(exponent))
        return text
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {format_value(v)}" for k, v in value.items())
    return str(value)


def _cell(value, code: bool = False) -> str:
    """A Markdown table cell: code font for names and numbers a reader may type, escaped pipes."""
    text = format_value(value).replace("|", "\\|").replace("\n", " ")
    plain = not code or isinstance(value, bool) or text == "—" or "`" in text or " " in text
    return text if plain else f"`{text}`"


def _provenance_rows(provenance: dict, corpus: dict | None) -> list[str]:
    p = provenance
    rows = [
        ("model", f"{_cell(p.get('name'), code=True)} ({_cell(p.get('source'))})"),
        ("architecture family", _cell(p.get("model_type"))),
        ("weights, SHA-256", f"`{p['sha256'][:16]}…`" if p.get("sha256") else "—"),
        (
            "content key",
            f"`{p['content_key'][:16]}…` (SHA-256 of the weights, config and tokenizer files)"
            if p.get("content_key")
            else "—",
        ),
        ("revision", _cell(p.get("revision")) if p.get("revision") else "— (not downloaded from the Hugging Face Hub)"),
    ]
    if p.get("rebuild_rel_error") is not None:
        rows.append(
            (
                "rebuild check",
                f"largest relative error {format_value(float(p['rebuild_rel_error']))} "
                "(attention outputs recomputed from the extracted pieces; refused above 10⁻⁵)",
            )
        )
    if corpus:
        dropped = corpus.get("dropped_lines") or 0
        rows.append(
            (
                "text",
                f"{_cell(corpus.get('name'), code=True)}, {corpus.get('sentences')} sentences"
                + (f" ({dropped} lines left out: only special or unknown tokens)" if dropped else ""),
            )
        )
    return [f"| {k} | {v} |" for k, v in rows]


def write_run_page(stage: Path, params: dict, results_dir: Path, chapters: dict[str, dict | None]) -> Path:
    """``book/this_build.md``: the model (with its weight hash), the text, and every chapter's parameters.

    ``chapters``: {stem: the parameters its parameters cell ran with
    (:func:`identifiability.chapters.executed.parameters_used`), or None for a chapter this build did not run
    (``--only``)}.
    """
    # in the book's order; a chapter this build did not run may have a file of an older build, under its old stem
    files = {stem: results_file(results_dir, stem) for stem in chapters}
    runs = {stem: read_json(f) for stem, f in files.items() if f.is_file()}
    first = next((r for r in runs.values() if r.get("provenance")), {})
    lines = [
        "# This build",
        "",
        "Which model, text and parameters produced the pages of this copy of the book. The full hashes are in "
        "each chapter's results file (`data/results/<model>/<corpus>/<chapter>.json`, under `provenance`).",
        "",
    ]
    if first:
        lines += ["## The model and the text", "", "| | |", "|---|---|"]
        lines += _provenance_rows(first["provenance"], first.get("corpus"))
    else:
        lines += [f"Model {_cell(params.get('model'), code=True)}, text {_cell(params.get('corpus'), code=True)}."]
    lines += [
        "",
        "## The chapters' parameters",
        "",
        "Each chapter's parameters cell as it ran in this build: its own defaults, with the values given to "
        "`make book` (`MODEL`, `CORPUS`, `PARAMS`) in their place, and what each sets (the comments of the "
        "cell, with the least value a parameter allows). Every chapter ran on the model and text above; "
        "rerunning with other values is described in {doc}`rerun`.",
        "",
    ]
    for stem, values in chapters.items():
        lines += [f"### {chapter_title(stem)}", ""]  # plain text: a role in a heading shows raw in the contents
        if values is None:
            lines += ["Not run in this build (`--only`).", ""]
            continue
        helps = parameter_help(stem)
        lines += ["| parameter | value | what it sets |", "|---|---|---|"]
        lines += [
            f"| `{name}` | {_cell(value, code=True)} | {helps.get(name, '—')} |"
            for name, value in values.items()
            if name not in ("model", "corpus", *BUILD_LOCATION)
        ]
        lines.append("")
    path = stage / "book" / "this_build.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _markdown_text(text: str) -> str:
    """``text`` for a Markdown table cell: its `code` kept, elsewhere the characters Markdown would read
    (a pipe, ``<task>`` as an HTML tag, ``*`` and ``_`` as emphasis) escaped."""
    parts = text.split("`")
    for k in range(0, len(parts), 2):  # outside code spans
        for ch in "\\|<>*_":
            parts[k] = parts[k].replace(ch, "\\" + ch)
    return "`".join(parts)


def parameter_help(stem: str) -> dict[str, str]:
    """{name: what it sets} for a chapter's parameters: the comments of its source's parameters cell
    (:func:`identifiability.chapters.executed.cell_comments`, the one place the help is written), with the least value
    the chapter contract allows (:data:`identifiability.chapters.parameters.ALLOWED`)."""
    import jupytext

    source = paths.source_root() / "notebooks" / f"{stem}.md"
    if not source.exists():
        return {}
    cell = next((c for c in jupytext.read(source).cells if PARAMETERS in c.metadata.get("tags", [])), None)
    if cell is None:
        return {}
    help_, out = cell_comments(cell.source), {}
    for name in assignments(cell.source):
        text = _markdown_text(help_.get(name, ""))
        least = ALLOWED[name].minimum if name in ALLOWED else None
        if least is not None:
            text += f"{'; ' if text else ''}at least {least:g}"
        if text:
            out[name] = text
    return out


def chapter_title(stem: str) -> str:
    """The first heading of a chapter's source (``notebooks/<stem>.md``)."""
    source = paths.source_root() / "notebooks" / f"{stem}.md"
    for line in source.read_text(encoding="utf-8").splitlines() if source.exists() else []:
        if line.startswith("# "):
            return line[2:].strip()
    return stem.split("_", 1)[-1].replace("_", " ").capitalize()


RUN_TIMES_MARKER = "<!-- chapter run times: written by the build -->"
LAUNCH_MARKER = "<!-- launch buttons: written by the build -->"


def launch_text(repository: str | None) -> str:
    """What the teachers' page says about launch buttons: they exist only in a copy built with the book's
    public repository (:func:`identifiability.book.build.repository_url`)."""
    if repository:
        return (
            f"In this copy, each chapter page also has a launch button (Binder) that opens the chapter in "
            f"JupyterLab on mybinder.org, built from {repository}."
        )
    return (
        "This copy was built without a repository address, so its chapter pages have no launch button; a copy "
        "built with one (`make book REPO_URL=https://github.com/<owner>/<repo>`, {doc}`rerun`) has a Binder "
        "button on every chapter page."
    )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def measured_seconds(notebooks: Path, stems: list[str]) -> dict[str, float | None]:
    """{stem: how long papermill took to execute ``notebooks/<stem>.ipynb``, None where it did not}."""
    found = {stem: Path(notebooks) / f"{stem}.ipynb" for stem in stems}
    return {stem: run_seconds(read_notebook(f)) if f.exists() else None for stem, f in found.items()}


def write_teachers_page(
    stage: Path,
    notebooks: Path,
    stems: list[str],
    cores: int | None,
    device: str,
    repository: str | None = None,
    beside: dict[str, int] | None = None,
) -> Path:
    """Fill the run-time table of ``book/teachers.md`` from the executed chapters (papermill's measured
    duration of each), for the machine that built this copy, and say whether its pages have launch buttons
    (``repository``: the address they open, None without buttons). ``beside``: {stem: threads} of the chapters
    this build ran beside others (:func:`identifiability.book.build.execute_chapters`), which their rows say."""
    beside = beside or {}
    rows, total = ["| chapter | run time in this build |", "|---|---|"], 0.0
    for stem, seconds in measured_seconds(notebooks, stems).items():
        total += seconds or 0.0
        threads = beside.get(stem)
        note = f" ({'one thread' if threads == 1 else f'{threads} threads'}, beside another chapter)" if threads else ""
        shown = _minutes(seconds) + note if seconds else ""
        rows.append(f"| {{doc}}`../notebooks/{stem}` | {shown or 'not run in this build'} |")
    rows.append(f"| all chapters, one after the other | {_minutes(total)} |")
    where = f"{cores} CPU cores" if device == "cpu" else f"device `{device}`"
    # the sum was read as the build's own time, which running chapters side by side makes shorter (what a
    # chapter takes alone, the page's own text says after the table)
    after = ["", "This build ran its chapters side by side, so it took less than that sum."] if beside else []
    table = "\n".join(
        [f"Measured while building this copy of the book, on {where}, with the parameters on {{doc}}`this_build`:", ""]
        + rows
        + after
    )
    path = stage / "book" / "teachers.md"
    text = path.read_text(encoding="utf-8")
    for marker in (RUN_TIMES_MARKER, LAUNCH_MARKER):
        if marker not in text:
            raise ValueError(f"{path.name} has lost its marker {marker!r}")
    text = text.replace(RUN_TIMES_MARKER, table).replace(LAUNCH_MARKER, launch_text(repository))
    path.write_text(text, encoding="utf-8")
    return path
