"""Altair charts that draw offline: in JupyterLab, in a downloaded notebook, and on a static page.

Altair's own renderers load vega from a CDN. The ``offline`` renderer registered here emits the chart's
Vega-Lite spec alone, under the MIME type JupyterLab draws with its built-in vega-lite renderer (no
network, no trust needed). JupyterLab 4 has no renderer for Altair 6's ``vegalite.v6`` type, but draws
these specs with its vega-lite 5 (the book test compiles every chapter's charts with vega-lite 5.8).
For the book's pages the build adds :func:`chart_html` beside each spec (``identifiability.book``): a bare
``<div>`` plus a ``vegaEmbed(...)`` call, with vega/vega-lite/vega-embed vendored once per page that has
a chart (``book/_vendor/vega-bundle.js``, written by :func:`write_vega_bundle`). A notebook carries each
chart once; JupyterLab would prefer an HTML copy to the spec and show it without its script.
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path

import altair as alt

VEGALITE_MIME = "application/vnd.vegalite.v5+json"  # what JupyterLab 4 draws (see above)
MAX_ROWS = 20_000


def _render(spec: dict, **_) -> dict:
    return {VEGALITE_MIME: spec}


def chart_html(spec: dict) -> str:
    """The HTML that draws ``spec`` on a static page that loads the vega bundle.

    A chart wider than its output area (a phone, or a narrow window) is scaled down to the area's width with
    its proportions kept, rather than cut off; charts are designed to fit the 688 px output column of a
    desktop page unscaled. Only pages do this: JupyterLab draws the spec itself, at its own size.
    """
    div = f"vis-{uuid.uuid4().hex[:12]}"
    return (
        f'<div id="{div}" class="vega-chart" style="max-width:100%"></div>\n'
        "<script>(function(){var spec=" + json.dumps(spec).replace("</", "<\\/") + ";"  # a token "</script>" stays text
        f'if(window.vegaEmbed){{vegaEmbed("#{div}",spec,{{actions:false,renderer:"svg"}})'
        ".then(function(r){"
        f'var e=document.getElementById("{div}"),d=e.querySelector("svg,canvas");'
        'e.style.display="block";if(d){d.style.maxWidth="100%";d.style.height="auto";}'
        # the view, for the book's browser test (it compares the data a control leaves in view)
        f'(window.vegaViews=window.vegaViews||{{}})["{div}"]=r.view;}}).catch(console.error);}}'
        f'else{{document.getElementById("{div}").textContent="(chart: vega is not loaded on this page)";}}'
        "})();</script>"
    )


alt.renderers.register("offline", _render)


def enable_offline() -> None:
    """Use the offline renderer and allow data up to ``MAX_ROWS`` rows (charts are sliced to stay small)."""
    alt.renderers.enable("offline")
    alt.data_transformers.enable("default", max_rows=MAX_ROWS)


def write_vega_bundle(path: str | Path) -> Path:
    """Write vega + vega-lite + vega-embed as one script that defines ``window.vegaEmbed``.

    Wrapped in a function scope because the bundle's top-level ``const _`` clashes with Sphinx's ``_``.
    """
    import vl_convert as vlc

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    js = vlc.javascript_bundle(vl_version=alt.SCHEMA_VERSION.rsplit(".", 1)[0])
    path.write_text("(function () {\n" + js + "\n})();\n", encoding="utf-8")
    return path


def token_axis(tokens: list[str], title: str, pixels: int | None = None) -> alt.Axis:
    """An axis over integer positions that shows each position's token (labels live in the spec once).

    ``pixels``: the axis length; when the tokens would be closer than a label's height (11 px), only every
    k-th is labelled (positions 0, k, 2k, ...) so the labels stay readable; the rest show on hover
    (:func:`token_tooltip`).
    """
    labels = json.dumps([f"{i} {t}" for i, t in enumerate(tokens)])
    every = label_stride(len(tokens), pixels)
    expr = f"{labels}[datum.value]" if every == 1 else f"datum.value % {every} == 0 ? {labels}[datum.value] : ''"
    return alt.Axis(title=title, labelExpr=expr, labelOverlap=False)


def sentence_label_expr(token_lists: list[list[str]], pixels: int, label_px: int = 11, param: str = "sentence") -> str:
    """A ``labelExpr`` for an axis over token positions of the sentence a chart parameter ``param`` picks:
    that sentence's token at every k-th position (:func:`label_stride` of its length), '' elsewhere."""
    every = json.dumps([label_stride(len(t), pixels, label_px) for t in token_lists])
    labels = json.dumps(token_lists)
    return f"datum.value % {every}[{param}] == 0 ? {labels}[{param}][datum.value] : ''"


def label_stride(n: int, pixels: int | None, label_px: int = 11) -> int:
    """Label every k-th of ``n`` positions on an axis ``pixels`` long, so labels are ``label_px`` apart."""
    if not pixels or n * label_px <= pixels:
        return 1
    return -(-n * label_px // pixels)


def token_tooltip(tokens: list[str], field: str) -> str:
    """A Vega expression for ``alt.Chart.transform_calculate``: the token at integer position ``field``."""
    return f"{json.dumps([f'{i} {t}' for i, t in enumerate(tokens)])}[datum.{field}]"


def spec_bytes(chart: alt.TopLevelMixin) -> int:
    """Size of a chart's Vega-Lite spec as embedded in the page (JSON bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return len(json.dumps(chart.to_dict()).encode())
