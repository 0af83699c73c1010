"""Altair charts that draw in a static, offline page.

Altair's own renderers load vega from a CDN. The ``offline`` renderer registered here emits a bare
``<div>`` plus a ``vegaEmbed(...)`` call; the book vendors vega/vega-lite/vega-embed once per page
(``book/_vendor/vega-bundle.js``, written by :func:`write_vega_bundle`). The same output also carries
the vega-lite MIME bundle, so live JupyterLab draws the chart natively.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import altair as alt
import pandas as pd

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


def attention_explorer(
    attentions, tokens: list[str], title: str = "Attention", value_name: str = "weight"
) -> alt.Chart:
    """One heatmap of a (L, H, d_s, d_s) attention tensor with a layer slider and a head dropdown.

    Rows are queries (the attending token), columns are keys.
    """
    L, H, S, _ = attentions.shape
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    idx = pd.MultiIndex.from_product([range(L), range(H), range(S), range(S)], names=["layer", "head", "q", "k"])
    df = pd.DataFrame({value_name: attentions.detach().float().reshape(-1).numpy()}, index=idx).reset_index()
    if len(df) > MAX_ROWS * 50:
        raise ValueError(f"{len(df)} cells is too many for a static page; pass fewer layers or a shorter sentence")
    df["query"] = [labels[i] for i in df["q"]]
    df["key"] = [labels[i] for i in df["k"]]
    df[value_name] = df[value_name].round(4)
    layer = alt.param(name="layer", value=0, bind=alt.binding_range(min=0, max=L - 1, step=1, name="layer "))
    head = alt.param(name="head", value=0, bind=alt.binding_select(options=list(range(H)), name="head "))
    size = max(200, min(520, 14 * S))
    return (
        alt.Chart(df.drop(columns=["q", "k"]), title=title)
        .mark_rect()
        .encode(
            x=alt.X("key:N", sort=labels, title="key (attended-to token)"),
            y=alt.Y("query:N", sort=labels, title="query (attending token)"),
            color=alt.Color(f"{value_name}:Q", scale=alt.Scale(scheme="blues")),
            tooltip=["query", "key", alt.Tooltip(f"{value_name}:Q", format=".3f")],
        )
        .add_params(layer, head)
        .transform_filter((alt.datum.layer == layer) & (alt.datum.head == head))
        .properties(width=size, height=size)
    )
