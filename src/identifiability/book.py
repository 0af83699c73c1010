"""What the book build does beyond Jupyter Book's defaults.

- Executed notebooks are made fit for a page and a download (:func:`clean_executed`, called by
  ``cli.run_notebook`` on every executed chapter): papermill's injected ``# Parameters`` cell is merged into
  the cell tagged ``parameters`` (so the page shows one parameters cell with the values used, and a reader
  who changes ``model`` there really changes it), stderr output (progress bars, warnings) is removed, and
  papermill's bookkeeping (a full copy of the source notebook, per-cell timestamps) is dropped.
- A chart is a Vega-Lite spec in the notebook (what Jupyter draws); only the page versions of the
  chapters get the HTML that draws it on a static page (:func:`prepare_pages`), and the download each page
  offers (``_sources/notebooks/<chapter>.ipynb``) is the executed chapter itself (:func:`write_downloads`).
  Likewise a widget panel (chapter 7) is live in the download; its page shows it as it was when the book was
  built, in plain HTML (:func:`page_version`), and the page version carries no widget state, so no page
  loads the 3.5 MB widget manager. HTML tables printed by cells scroll sideways in a labelled box.
- Each page loads only the scripts it uses: this module is also a Sphinx extension (``_config.yml``,
  ``extra_extensions``) that loads the vega bundle only on pages with a chart, drops the unused thebe
  scripts and any script included twice. After the build, :func:`prune_static` drops the theme's icon
  script (its style sheet draws the same icons with a web font), labels the table scroll boxes, and deletes
  the vendored scripts no page loads (the widget manager and require.js ship only with widget state).
"""

from __future__ import annotations

import ast
import html
import json
import re
import shutil
from pathlib import Path

INJECTED = "injected-parameters"
# Parameters that say where this build filed its results, not what was computed: a download keeps the
# declared default ("" = data/results/<model>/<corpus>), so a reader who changes ``model`` gets a new folder.
BUILD_LOCATION = ("results_dir",)
VEGA_BUNDLE = "vega-bundle.js"


# --- executed notebooks ---------------------------------------------------------------------------------


def _assignments(source: str) -> dict[str, list[ast.expr]]:
    """Top-level ``name = value`` statements of a cell: name -> the value nodes (in order)."""
    out: dict[str, list[ast.expr]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


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
    tagged = lambda c, t: t in c.get("metadata", {}).get("tags", [])  # noqa: E731
    injected = next((i for i, c in enumerate(cells) if tagged(c, INJECTED)), None)
    target = next((i for i, c in enumerate(cells) if tagged(c, "parameters")), None)
    if injected is None:
        return nb
    if target is None:  # nothing to merge into: the injected cell becomes the parameters cell
        cells[injected]["metadata"]["tags"] = ["parameters"]
        return nb
    src_of = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]  # noqa: E731
    given_src = src_of(cells[injected])
    given = {name: ast.get_source_segment(given_src, nodes[-1]) for name, nodes in _assignments(given_src).items()}
    source = src_of(cells[target])
    lines = source.splitlines(keepends=True)
    declared = _assignments(source)
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


def _read(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _write(nb: dict, path: Path, compact: bool = False) -> None:
    if compact:
        text = json.dumps(nb, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(nb, ensure_ascii=False, indent=1, sort_keys=True)
    Path(path).write_text(text + "\n", encoding="utf-8")


def clean_executed(path: Path) -> Path:
    """:func:`clean_notebook` on an executed ``.ipynb`` file, rewritten in place."""
    _write(clean_notebook(_read(path)), path)
    return path


def _chart_spec(data: dict) -> dict | None:
    return next((v for k, v in data.items() if k.startswith("application/vnd.vegalite")), None)


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TABLE_SCROLL = (
    '<div class="output-table-scroll" role="region" tabindex="0" '
    'aria-label="Table; scrolls sideways where it is wider than the page" style="overflow-x:auto;max-width:100%">'
)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_html(out: dict) -> str:
    """One output (of a cell, or captured by an Output widget) as HTML: a chart draws, HTML stays, plain
    text is preformatted; stderr is left out (as :func:`clean_notebook` leaves it out of cells)."""
    from .charts.render import chart_html

    if out.get("output_type") == "stream":
        return "" if out.get("name") == "stderr" else f"<pre>{html.escape(_text(out.get('text', '')))}</pre>"
    if out.get("output_type") == "error":
        return f"<pre>{html.escape(out.get('ename', ''))}: {html.escape(out.get('evalue', ''))}</pre>"
    data = out.get("data", {})
    spec = _chart_spec(data)
    if spec is not None:
        return chart_html(spec)
    if "text/html" in data:
        return _text(data["text/html"])
    for mime in ("image/svg+xml", "image/png", "image/jpeg"):
        if mime in data:
            body = _text(data[mime])
            return body if mime == "image/svg+xml" else f'<img src="data:{mime};base64,{body.strip()}" alt="">'
    if "text/plain" in data:
        return f"<pre>{html.escape(_text(data['text/plain']))}</pre>"
    return ""


def widget_html(model_id: str, state: dict) -> str | None:
    """The static HTML of widget ``model_id`` as saved in a notebook's widget ``state`` ({model id: {model_name,
    state}}): boxes lay out their children, a text box is a disabled ``<input>`` under its label, an HTML
    widget is its value, an Output widget its captured outputs (charts drawn by
    :func:`identifiability.charts.render.chart_html`). None when the state does not hold the widget."""
    model = state.get(model_id)
    if model is None:
        return None
    name, s = model.get("model_name", ""), model.get("state", {})
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        children = [
            widget_html(c[len("IPY_MODEL_") :], state) or ""
            for c in s.get("children", [])
            if c.startswith("IPY_MODEL_")
        ]
        style = "display:flex;flex-direction:column" if name != "HBoxModel" else "display:flex;flex-wrap:wrap;gap:1em"
        return f'<div class="widget-static" style="{style}">' + "".join(f"<div>{c}</div>" for c in children) + "</div>"
    if name in ("TextModel", "TextareaModel", "PasswordModel"):
        field = f"w-{model_id[:12]}"
        label = s.get("description", "")
        value = html.escape(str(s.get("value", "")), quote=True)
        tag = (
            f'<textarea id="{field}" disabled style="width:100%">{value}</textarea>'
            if name == "TextareaModel"
            else f'<input id="{field}" type="text" value="{value}" disabled style="width:100%">'
        )
        return f'<label for="{field}">{html.escape(label)}</label> {tag}' if label else tag
    if name in ("HTMLModel", "HTMLMathModel"):
        return str(s.get("value", ""))
    if name == "LabelModel":
        return f"<span>{html.escape(str(s.get('value', '')))}</span>"
    if name == "OutputModel":
        return "".join(_output_html(o) for o in s.get("outputs", []))
    if "value" in s:  # another control (slider, dropdown, ...): its description and value as text
        label = s.get("description", "")
        return f"<span>{html.escape(str(label))} {html.escape(str(s['value']))}</span>"
    return ""


def _scrollable(text: str) -> str:
    """HTML that holds a table, in a labelled box that scrolls sideways (once)."""
    if "<table" not in text or text.startswith('<div class="output-table-scroll"'):
        return text
    return f"{TABLE_SCROLL}{text}</div>"


def page_version(nb: dict) -> dict:
    """The notebook as its page renders it (in place):

    - each chart (a Vega-Lite spec, which Jupyter draws) gets the HTML that draws it on a static page
      (:func:`identifiability.charts.render.chart_html`);
    - each widget output becomes the HTML of the widgets as they were when the notebook ran
      (:func:`widget_html`), and the notebook's widget state is dropped, so the page does not load the
      widget manager (a live panel needs a kernel; the download keeps the widgets);
    - each HTML output that holds a table (a DataFrame) is put in a labelled box that scrolls sideways.
    """
    from .charts.render import chart_html

    widgets = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                rendered = widget_html(str(data[WIDGET_VIEW].get("model_id", "")), widgets)
                del data[WIDGET_VIEW]
                if rendered is not None:
                    data["text/html"] = rendered
            if "text/html" in data:
                data["text/html"] = _scrollable(_text(data["text/html"]))
            spec = _chart_spec(data)
            if spec is not None and "text/html" not in data:
                data["text/html"] = chart_html(spec)
    nb.get("metadata", {}).pop("widgets", None)
    return nb


def prepare_pages(notebooks: Path, downloads: Path) -> list[Path]:
    """Before the book is built: keep each executed chapter of ``notebooks`` as its download (compact JSON:
    Jupyter indents it again on save), then turn it into its page version (:func:`page_version`)."""
    shutil.rmtree(downloads, ignore_errors=True)  # none left from an earlier build
    downloads.mkdir(parents=True)
    kept = []
    for source in sorted(Path(notebooks).glob("*.ipynb")):
        nb = _read(source)
        _write(nb, downloads / source.name, compact=True)
        _write(page_version(nb), source)
        kept.append(downloads / source.name)
    return kept


def write_downloads(downloads: Path, html: Path) -> list[Path]:
    """After the book is built: the ``.ipynb`` each page offers (``html/_sources/notebooks``) is the
    executed chapter, not its page version (one copy of each chart, the one Jupyter draws)."""
    written = []
    for source in sorted(Path(downloads).glob("*.ipynb")):
        target = Path(html) / "_sources" / "notebooks" / source.name
        if target.exists():
            shutil.copyfile(source, target)
            written.append(target)
    return written


def parameters_used(path: Path) -> dict | None:
    """{name: value} of the parameters cell of an executed (cleaned) chapter, None if there is none: the
    values it ran with. A value that is not a Python literal is kept as its source text."""
    if not Path(path).exists():
        return None
    cell = next((c for c in _read(path)["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return None
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    out = {}
    for name, nodes in _assignments(source).items():
        try:
            out[name] = ast.literal_eval(nodes[-1])
        except ValueError:
            out[name] = ast.get_source_segment(source, nodes[-1])
    return out


def run_seconds(nb: dict) -> float | None:
    """How long papermill took to execute the notebook (None when it was not executed by papermill)."""
    return nb.get("metadata", {}).get("papermill", {}).get("duration")


# --- page scripts (Sphinx extension) ----------------------------------------------------------------------

# sphinx-thebe is loaded by Jupyter Book whatever the configuration; the book does not use thebe (its
# launch buttons are Binder links), and its config script is included twice, a SyntaxError on every page.
_UNUSED = ("sphinx-thebe.js", "sphinx-thebe.css")


def _asset_key(asset) -> tuple:
    filename = str(getattr(asset, "filename", asset) or "")  # None and "" both mean an inline script
    attributes = tuple(sorted((k, str(v)) for k, v in getattr(asset, "attributes", {}).items()))
    return (filename, attributes)


def _page_assets(app, pagename, templatename, context, doctree) -> None:
    """Per page: the vega bundle only where a chart is; no thebe; every script and style sheet once."""
    if doctree is not None and 'class="vega-chart"' in context.get("body", ""):
        app.add_js_file(VEGA_BUNDLE)
    for key in ("script_files", "css_files"):
        files, seen, kept = context.get(key, []), set(), []
        for asset in files:
            filename = str(getattr(asset, "filename", asset) or "")
            body = str(getattr(asset, "attributes", {}).get("body", ""))
            if filename.split("?")[0].endswith(_UNUSED) or "THEBE_JS_URL" in body:
                continue
            if _asset_key(asset) not in seen:
                seen.add(_asset_key(asset))
                kept.append(asset)
        files[:] = kept


def setup(app):
    # after the other extensions have added their per-page files (myst-nb's widget scripts, priority 500)
    app.connect("html-page-context", _page_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# Files in _static that are loaded by a <script> or <link> when a page needs them; the fontawesome script
# only redraws icons that the theme's style sheet already draws with its web font.
_OPTIONAL_STATIC = ("vega-bundle.js", "html-manager.js", "require.min.js", *_UNUSED, "scripts/fontawesome.js")
_THEBE_CONFIG = re.compile(r'\s*<script type="text/x-thebe-config">.*?</script>', re.S)  # thebe is not used
_FONTAWESOME_JS = re.compile(r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')
# The theme lets a wide table scroll sideways in a box; a reader (and a screen reader) is told so.
_TABLE_SCROLLER = '<div class="pst-scrollable-table-container">'
_LABELLED_SCROLLER = (
    '<div class="pst-scrollable-table-container" role="region" tabindex="0" '
    'aria-label="Table; scrolls sideways where it is wider than the page">'
)


def prune_static(html: Path) -> list[str]:
    """After the build: drop the fontawesome script from every page and label the theme's table scroll
    boxes, then delete the optional static files that no page loads. Returns the names deleted."""
    html = Path(html)
    used = set()
    for page in html.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        edited = _THEBE_CONFIG.sub("", _FONTAWESOME_JS.sub("", text)).replace(_TABLE_SCROLLER, _LABELLED_SCROLLER)
        if edited != text:
            page.write_text(edited, encoding="utf-8")
        used |= {name for name in _OPTIONAL_STATIC if f"_static/{name}" in edited}
    deleted = []
    for name in _OPTIONAL_STATIC:
        f = html / "_static" / name
        if name not in used and f.exists():
            f.unlink()
            deleted.append(name)
    return deleted


# --- generated pages ---------------------------------------------------------------------------------------

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


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
            return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"
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

    ``chapters``: {stem: the parameters its parameters cell ran with (:func:`parameters_used`), or None for
    a chapter this build did not run (``--only``)}.
    """
    from .results import read_json

    runs = {f.stem: read_json(f) for f in sorted(Path(results_dir).glob("*.json")) if f.stem in chapters}
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
        "`make book` (`MODEL`, `CORPUS`, `PARAMS`) in their place. Every chapter ran on the model and text "
        "above; rerunning with other values is described in {doc}`rerun`.",
        "",
    ]
    for stem, values in chapters.items():
        lines += [f"### {chapter_title(stem)}", ""]  # plain text: a role in a heading shows raw in the contents
        if values is None:
            lines += ["Not run in this build (`--only`).", ""]
            continue
        lines += ["| parameter | value |", "|---|---|"]
        lines += [
            f"| `{name}` | {_cell(value, code=True)} |"
            for name, value in values.items()
            if name not in ("model", "corpus", *BUILD_LOCATION)
        ]
        lines.append("")
    path = stage / "book" / "this_build.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def chapter_title(stem: str) -> str:
    """The first heading of a chapter's source (``notebooks/<stem>.md``)."""
    from . import paths

    source = paths.source_root() / "notebooks" / f"{stem}.md"
    for line in source.read_text(encoding="utf-8").splitlines() if source.exists() else []:
        if line.startswith("# "):
            return line[2:].strip()
    return stem.split("_", 1)[-1].replace("_", " ").capitalize()


RUN_TIMES_MARKER = "<!-- chapter run times: written by the build -->"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def write_teachers_page(stage: Path, notebooks: Path, stems: list[str], cores: int | None, device: str) -> Path:
    """Fill the run-time table of ``book/teachers.md`` from the executed chapters (papermill's measured
    duration of each), for the machine that built this copy."""
    rows, total = ["| chapter | run time in this build |", "|---|---|"], 0.0
    for stem in stems:
        f = Path(notebooks) / f"{stem}.ipynb"
        seconds = run_seconds(_read(f)) if f.exists() else None
        total += seconds or 0.0
        rows.append(f"| {{doc}}`../notebooks/{stem}` | {_minutes(seconds) if seconds else 'not run in this build'} |")
    rows.append(f"| all chapters | {_minutes(total)} |")
    where = f"{cores} CPU cores" if device == "cpu" else f"device `{device}`"
    table = "\n".join(
        [f"Measured while building this copy of the book, on {where}, with the parameters on {{doc}}`this_build`:", ""]
        + rows
    )
    path = stage / "book" / "teachers.md"
    text = path.read_text(encoding="utf-8")
    if RUN_TIMES_MARKER not in text:
        raise ValueError(f"{path.name} has lost its marker line {RUN_TIMES_MARKER!r}")
    path.write_text(text.replace(RUN_TIMES_MARKER, table), encoding="utf-8")
    return path
