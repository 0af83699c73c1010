"""Altair charts that draw in a static, offline page.

Altair's own renderers load vega from a CDN. The ``offline`` renderer registered here emits a bare
``<div>`` plus a ``vegaEmbed(...)`` call; the book vendors vega/vega-lite/vega-embed once per page
(``book/_vendor/vega-bundle.js``, written by :func:`write_vega_bundle`). The same output also carries
the vega-lite MIME bundle, so live JupyterLab draws the chart natively.
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path

import altair as alt

VEGALITE_MIME = f"application/vnd.vegalite.v{alt.SCHEMA_VERSION.lstrip('v').split('.')[0]}+json"
MAX_ROWS = 20_000


def _render(spec: dict, **_) -> dict:
    div = f"vis-{uuid.uuid4().hex[:12]}"
    html = (
        f'<div id="{div}" class="vega-chart"></div>\n'
        "<script>(function(){var spec=" + json.dumps(spec) + ";"
        f'if(window.vegaEmbed){{vegaEmbed("#{div}",spec,{{actions:false}}).catch(console.error);}}'
        f'else{{document.getElementById("{div}").textContent="(chart: vega is not loaded on this page)";}}'
        "})();</script>"
    )
    return {VEGALITE_MIME: spec, "text/html": html}


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
