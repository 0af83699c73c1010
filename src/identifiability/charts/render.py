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
    """The HTML that draws ``spec`` on a static page that loads the vega bundle."""
    div = f"vis-{uuid.uuid4().hex[:12]}"
    return (
        f'<div id="{div}" class="vega-chart"></div>\n'
        "<script>(function(){var spec=" + json.dumps(spec).replace("</", "<\\/") + ";"  # a token "</script>" stays text
        f'if(window.vegaEmbed){{vegaEmbed("#{div}",spec,{{actions:false}})'
        # the view, for the book's browser test (it compares the data a control leaves in view)
        f'.then(function(r){{(window.vegaViews=window.vegaViews||{{}})["{div}"]=r.view;}}).catch(console.error);}}'
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


def token_axis(tokens: list[str], title: str) -> alt.Axis:
    """An axis over integer positions that shows each position's token (labels live in the spec once)."""
    labels = json.dumps([f"{i} {t}" for i, t in enumerate(tokens)])
    return alt.Axis(title=title, labelExpr=f"{labels}[datum.value]", labelOverlap=False)


def spec_bytes(chart: alt.TopLevelMixin) -> int:
    """Size of a chart's Vega-Lite spec as embedded in the page (JSON bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return len(json.dumps(chart.to_dict()).encode())
