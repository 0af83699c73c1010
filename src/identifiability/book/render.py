"""The book's pages as Jupyter Book renders them, beyond its defaults.

- A chart is a Vega-Lite spec in the notebook (what Jupyter draws); only the page versions of the
  chapters get the HTML that draws it on a static page (:func:`prepare_pages`), and the download each page
  offers (``_sources/notebooks/<chapter>.ipynb``) is the executed chapter itself (:func:`write_downloads`;
  executed chapters are cleaned first, :mod:`identifiability.chapters.executed`). Likewise a widget panel (chapter 8)
  is live in the download; its page shows it as it was when the book was built, in plain HTML
  (:func:`page_version`), and the page version carries no widget state, so no page loads the 3.5 MB widget
  manager. HTML tables printed by cells scroll sideways in a labelled box.
- Each page loads only the scripts it uses: this module is also a Sphinx extension (``_config.yml``,
  ``extra_extensions``) that loads the vega bundle only on pages with a chart, drops the unused thebe
  scripts and any script included twice. After the build, :func:`prune_static` drops the theme's icon
  script (its style sheet draws the same icons with a web font), labels the table scroll boxes, and deletes
  the vendored scripts no page loads (the widget manager and require.js ship only with widget state).
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from ..chapters.executed import read_notebook, write_notebook

TABLE_SCRIPT = "book.js"  # from book/_styles, a static path of the book (_config.yml)
VEGA_BUNDLE = "vega-bundle.js"


# --- page versions of executed notebooks -------------------------------------------------------------------


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
    from ..charts.render import chart_html

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
    from ..charts.render import chart_html

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
        nb = read_notebook(source)
        write_notebook(nb, downloads / source.name, compact=True)
        write_notebook(page_version(nb), source)
        kept.append(downloads / source.name)
    return kept


def write_downloads(downloads: Path, html: Path) -> list[Path]:
    """After the book is built: the ``.ipynb`` each page offers (``html/_sources/notebooks``) is the
    executed chapter, not its page version (one copy of each chart, the one Jupyter draws); the student
    versions the pages link (``downloads/handouts``, :func:`identifiability.book.handout.publish`) go to
    ``html/handouts``."""
    from .handout import HANDOUTS

    written = []
    if (Path(downloads) / HANDOUTS).is_dir():
        shutil.copytree(Path(downloads) / HANDOUTS, Path(html) / HANDOUTS, dirs_exist_ok=True)
        written += sorted((Path(html) / HANDOUTS).glob("*.ipynb"))
    for source in sorted(Path(downloads).glob("*.ipynb")):
        target = Path(html) / "_sources" / "notebooks" / source.name
        if target.exists():
            shutil.copyfile(source, target)
            written.append(target)
    return written


# --- page scripts (Sphinx extension) ----------------------------------------------------------------------

# sphinx-thebe is loaded by Jupyter Book whatever the configuration; the book does not use thebe (its
# launch buttons are Binder links), and its config script is included twice, a SyntaxError on every page.
_UNUSED = ("sphinx-thebe.js", "sphinx-thebe.css")


def _asset_key(asset) -> tuple:
    filename = str(getattr(asset, "filename", asset) or "")  # None and "" both mean an inline script
    attributes = tuple(sorted((k, str(v)) for k, v in getattr(asset, "attributes", {}).items()))
    return (filename, attributes)


def page_assets(app, pagename, templatename, context, doctree) -> None:
    """Per page: the vega bundle only where a chart is, the table script (a table that scrolls sideways says so:
    book/_styles/book.js) only where a table is; no thebe; every script and style sheet once."""
    if doctree is not None and 'class="vega-chart"' in context.get("body", ""):
        app.add_js_file(VEGA_BUNDLE)
    if doctree is not None and "<table" in context.get("body", ""):
        app.add_js_file(TABLE_SCRIPT)
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
    app.connect("html-page-context", page_assets, priority=900)
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


# A source map serves a developer's debugger, not a reader: the themes and the widget extension ship them.
_SOURCE_MAP_LINK = re.compile(r"\n?/[/*]# sourceMappingURL=\S+?\.map(?: \*/)?[ \t]*(?=\n|$)")


def drop_source_maps(static: Path) -> list[str]:
    """Delete every ``*.map`` below ``static`` and the comments that point at them (a browser that opened its
    developer tools would otherwise ask for a missing file). Returns the names deleted, relative to
    ``static``."""
    deleted = []
    for m in sorted(static.rglob("*.map")):
        deleted.append(m.relative_to(static).as_posix())
        m.unlink()
    for f in [*static.rglob("*.js"), *static.rglob("*.css")]:
        text = f.read_text(encoding="utf-8", errors="surrogateescape")
        if "sourceMappingURL" in text:
            f.write_text(_SOURCE_MAP_LINK.sub("", text), encoding="utf-8", errors="surrogateescape")
    return deleted


def prune_static(html: Path) -> list[str]:
    """After the build: drop the fontawesome script from every page and label the theme's table scroll
    boxes, then delete the optional static files that no page loads and every source map. Returns the names
    deleted."""
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
    return deleted + drop_source_maps(html / "_static")
