"""Altair charts that draw offline: in JupyterLab, in a downloaded notebook, and on a static page.

Altair's own renderers load vega from a CDN. The ``offline`` renderer registered here emits the chart's
Vega-Lite spec alone, under the MIME type JupyterLab draws with its built-in vega-lite renderer (no
network, no trust needed). JupyterLab 4 has no renderer for Altair 6's ``vegalite.v6`` type, but draws
these specs with its vega-lite 5 (the book test compiles every chapter's charts with vega-lite 5.8).
For the book's pages the build adds :func:`chart_html` beside each spec (``identifiability.book.render``): a bare
``<div>`` plus a ``vegaDraw(...)`` call, with vega/vega-lite/vega-embed and the narrow-page layout
(:mod:`identifiability.charts.narrow`) vendored once per page that has a chart (``book/_vendor/vega-bundle.js``,
written by :func:`write_vega_bundle`). Chart text shows the paper's notation as Unicode scripts
(:func:`plain_notation`), here and in JupyterLab. A notebook carries each
chart once; JupyterLab would prefer an HTML copy to the spec and show it without its script.

Besides, what several chapters' charts share: token axes, dash legends and menus (:func:`dropdown`,
:func:`combined_choice`), and the check that a legend tells its series apart (:func:`look_alike_legends`).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
import warnings
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
from altair.expr.core import Expression

from .narrow import FIT_JS, KEEP_WIDTH  # noqa: F401 (KEEP_WIDTH: for the chart modules)

VEGALITE_MIME = "application/vnd.vegalite.v5+json"  # what JupyterLab 4 draws (see above)
MAX_ROWS = 20_000


# Unicode sub- and superscripts for the paper's notation in chart text (x_{i+k} -> xᵢ₊ₖ): chart text is plain
# text, where TeX would show as typed.
_SUB = dict(zip("0123456789+-−=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
_SUP = dict(zip("0123456789+-−=()abcdefghijklmnoprstuvwxyzTL", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᵀᴸ"))
_SCRIPT = re.compile(r"([_^])(?:\{([^{}]*)\}|([0-9A-Za-z])(?![0-9A-Za-z]))")


def plain_notation(text: str) -> str:
    """``text`` with TeX-style scripts (``x_{i+k}``, ``e_i^l``, ``d_s``) as Unicode sub- and superscripts.
    A script with a character Unicode has no such form keeps its underscore or caret, without braces."""

    def script(m: re.Match) -> str:
        table = _SUB if m[1] == "_" else _SUP
        body = m[2] if m[2] is not None else m[3]
        if body and all(c in table for c in body.replace(" ", "")):
            return "".join(table[c] for c in body.replace(" ", ""))
        return m[1] + (body if len(body) <= 1 or m[2] is None else f"({body})")

    return _SCRIPT.sub(script, text)


def plain_titles(node: object, in_title: bool = False) -> object:
    """Every title, subtitle and header text of a spec through :func:`plain_notation` (data and expressions
    are left alone)."""
    if isinstance(node, str):
        return plain_notation(node) if in_title else node
    if isinstance(node, list):
        return [plain_titles(v, in_title) for v in node]
    if isinstance(node, dict):
        return {
            k: v if k in ("datasets", "data", "values") else plain_titles(v, in_title or k in ("title", "subtitle"))
            for k, v in node.items()
        }
    return node


def _render(spec: dict, **_) -> dict:
    return {VEGALITE_MIME: plain_titles(spec)}


def chart_html(spec: dict) -> str:
    """The HTML that draws ``spec`` on a static page that loads the vega bundle.

    The chart is laid out for the width of its output area before it is drawn (``window.vegaDraw``,
    :mod:`identifiability.charts.narrow`): on a phone its views stack and narrow, and its text keeps its size.
    Charts are designed to fit the 688 px output column of a desktop page. Only pages do this: JupyterLab
    draws the spec itself, at its own size.
    """
    div = f"vis-{uuid.uuid4().hex[:12]}"
    return (
        f'<div id="{div}" class="vega-chart" style="max-width:100%"></div>\n'
        "<script>(function(){var spec=" + json.dumps(spec).replace("</", "<\\/") + ";"  # a token "</script>" stays text
        f'if(window.vegaDraw){{vegaDraw("{div}",spec);}}'
        f'else{{document.getElementById("{div}").textContent="(chart: vega is not loaded on this page)";}}'
        "})();</script>"
    )


alt.renderers.register("offline", _render)


def enable_offline() -> None:
    """Use the offline renderer and allow data up to ``MAX_ROWS`` rows (charts are sliced to stay small)."""
    alt.renderers.enable("offline")
    alt.data_transformers.enable("default", max_rows=MAX_ROWS)


def write_vega_bundle(path: str | Path) -> Path:
    """Write vega + vega-lite + vega-embed as one script that defines ``window.vegaEmbed``, and the
    narrow-page layout that draws with it (``window.vegaDraw``, :mod:`identifiability.charts.narrow`).

    Wrapped in a function scope because the bundle's top-level ``const _`` clashes with Sphinx's ``_``.
    """
    import vl_convert as vlc

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    js = vlc.javascript_bundle(vl_version=alt.SCHEMA_VERSION.rsplit(".", 1)[0])
    path.write_text("(function () {\n" + js + "\n})();\n" + FIT_JS, encoding="utf-8")
    return path


def token_axis(tokens: list[str], title: str, pixels: int | str | None = None) -> alt.Axis:
    """An axis over integer positions that shows each position's token (labels live in the spec once).

    ``pixels``: the axis length; when the tokens would be closer than a label's height (11 px), only every
    k-th is labelled (positions 0, k, 2k, ...) so the labels stay readable; the rest show on hover
    (:func:`token_tooltip`). A signal name (``"width"`` of a single view) computes k in the browser from the
    length drawn, which a narrow page may cut (:mod:`identifiability.charts.narrow`).
    """
    labels = json.dumps([f"{i} {t}" for i, t in enumerate(tokens)])
    if isinstance(pixels, str):
        every = f"max(1, ceil({len(tokens) * 11} / {pixels}))"
        return alt.Axis(
            title=title, labelOverlap=False, labelExpr=f"datum.value % {every} == 0 ? {labels}[datum.value] : ''"
        )
    every = label_stride(len(tokens), pixels)
    expr = f"{labels}[datum.value]" if every == 1 else f"datum.value % {every} == 0 ? {labels}[datum.value] : ''"
    return alt.Axis(title=title, labelExpr=expr, labelOverlap=False)


def sentence_label_expr(
    token_lists: list[list[str]], pixels: int | str, label_px: int = 11, param: str = "sentence"
) -> str:
    """A ``labelExpr`` for an axis over token positions of the sentence a chart parameter ``param`` picks:
    that sentence's token at every k-th position (:func:`label_stride` of its length), '' elsewhere.
    ``pixels`` may name a signal (``"width"`` of a single view), as for :func:`token_axis`."""
    if isinstance(pixels, str):
        every = f"max(1, ceil({json.dumps([len(t) * label_px for t in token_lists])}[{param}] / {pixels}))"
    else:
        every = f"{json.dumps([label_stride(len(t), pixels, label_px) for t in token_lists])}[{param}]"
    labels = json.dumps(token_lists)
    return f"datum.value % {every} == 0 ? {labels}[{param}][datum.value] : ''"


def thinned_axis(labels: list[str], title: str, pixels: int, anchor: int = 0, keep: tuple[str, ...] = ()) -> alt.Axis:
    """An axis over ordinal ``labels`` (in axis order) ``pixels`` long that labels every k-th of them
    (:func:`label_stride`), counted from position ``anchor``, and those in ``keep``: labels that do not overlap."""
    every = label_stride(len(labels), pixels)
    shown = json.dumps([s for i, s in enumerate(labels) if (i - anchor) % every == 0 or s in keep])
    return alt.Axis(title=title, labelOverlap=False, labelExpr=f"indexof({shown}, datum.value) >= 0 ? datum.value : ''")


def label_stride(n: int, pixels: int | None, label_px: int = 11) -> int:
    """Label every k-th of ``n`` positions on an axis ``pixels`` long, so labels are ``label_px`` apart."""
    if not pixels or n * label_px <= pixels:
        return 1
    return -(-n * label_px // pixels)


def dash_legend(**kwargs) -> alt.Legend:
    """A legend for a ``strokeDash`` channel whose symbols show the dashes: line segments long enough for a
    dash pattern, where a line drawn with points gets a filled circle per entry, the same for every dash.
    Draw the points as a layer of their own: on a line with ``point=True`` Vega-Lite strokes these symbols
    in transparent."""
    return alt.Legend(symbolType="stroke", symbolSize=300, symbolStrokeWidth=2, symbolStrokeColor="#444", **kwargs)


def look_alike_legends(spec: dict) -> list[tuple[str, list[str]]]:
    """The legends of the chart ``spec`` (Vega-Lite) in which two entries are drawn alike, each as (the
    legend's description, its entries' labels): drawn as the pages draw it (SVG, the vega-lite of
    :func:`write_vega_bundle`), an entry's look is its symbol's shape, its fill and its stroke with the stroke's
    dashes, each only where it shows (a dash pattern on a symbol with no stroke does not)."""
    from xml.etree import ElementTree

    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec, vl_version=alt.SCHEMA_VERSION.rsplit(".", 1)[0].lstrip("v"))
    ns = "{http://www.w3.org/2000/svg}"
    has = lambda e, role: role in (e.get("class") or "").split()
    hidden = lambda colour, opacity: colour in (None, "none", "transparent") or opacity == "0"

    def look(a: dict) -> tuple:
        fill = None if hidden(a.get("fill"), a.get("fill-opacity")) else a.get("fill")
        stroked = not hidden(a.get("stroke"), a.get("stroke-opacity")) and float(a.get("stroke-width", 1)) > 0
        stroke = (a.get("stroke"), a.get("stroke-width"), a.get("stroke-dasharray")) if stroked else None
        return a.get("d"), fill, stroke

    out = []
    for legend in ElementTree.fromstring(svg).iter(f"{ns}g"):
        if not has(legend, "role-legend"):
            continue
        groups = list(legend.iter(f"{ns}g"))
        looks = [look(p.attrib) for g in groups if has(g, "role-legend-symbol") for p in g.findall(f"{ns}path")]
        labels = [t.text or "" for g in groups if has(g, "role-legend-label") for t in g.iter(f"{ns}text")]
        if len(set(looks)) < len(looks):
            out.append((legend.get("aria-label") or "", labels))
    return out


def token_tooltip(tokens: list[str], field: str) -> str:
    """A Vega expression for ``alt.Chart.transform_calculate``: the token at integer position ``field``."""
    return f"{json.dumps([f'{i} {t}' for i, t in enumerate(tokens)])}[datum.{field}]"


def spec_bytes(chart: alt.TopLevelMixin) -> int:
    """Size of a chart's Vega-Lite spec as embedded in the page (JSON bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return len(json.dumps(chart.to_dict()).encode())


def dropdown(name: str, options: list, value: str | None = None) -> alt.Parameter:
    """A select box bound to parameter ``name``, set to ``value`` (default: the first option)."""
    return alt.param(
        name=name,
        value=options[0] if value is None else value,
        bind=alt.binding_select(options=options, name=f"{name} "),
    )


def _merged_label(combos: list[tuple], label) -> str:
    """One option's name for the choices that all show the same data: "linear map, l2/cos loss, cos lookup"
    where they differ in one field, each choice named where they are no such product."""
    values = [list(dict.fromkeys(c[i] for c in combos)) for i in range(len(combos[0]))]
    if len(combos) == int(np.prod([len(v) for v in values])):
        return label(*("/".join(map(str, v)) for v in values))
    return " = ".join(label(*c) for c in combos)


def combined_choice(
    df: pd.DataFrame, fields: list[str], order: list[list], measures: list[str], label, default: tuple, name: str
) -> tuple[pd.DataFrame, list[alt.Parameter], Expression]:
    """One dropdown ``name`` over the combinations of ``fields`` (each in the given ``order``), where two
    combinations that show the same ``measures`` (every other column matched) are one option, named by
    :func:`_merged_label`: every option changes what the chart shows, in every view. No dropdown where only
    one option is left. Returns the rows of one combination per option with a column ``name`` (the option),
    the parameters and the filter they set; the option holding ``default`` is selected first."""
    keys = [c for c in df.columns if c not in measures and c not in fields]
    groups: list[tuple[pd.DataFrame, pd.DataFrame, list[tuple]]] = []  # (comparable view, rows, combinations)
    for combo in itertools.product(*order):
        rows = df.loc[np.logical_and.reduce([df[f] == v for f, v in zip(fields, combo)])]
        if rows.empty:
            continue
        view = rows[keys + measures].sort_values(keys).reset_index(drop=True)
        same = next((g for g in groups if g[0].equals(view)), None)
        if same is None:
            groups.append((view, rows, [combo]))
        else:
            same[2].append(combo)
    options = [_merged_label(g[2], label) for g in groups]
    out = pd.concat([g[1].assign(**{name: o}) for g, o in zip(groups, options)], ignore_index=True)
    value = next((o for g, o in zip(groups, options) if default in g[2]), options[0])
    if len(options) == 1:
        return out, [], alt.datum[name] == value
    p = dropdown(name, options, value)
    return out, [p], alt.datum[name] == p
