"""Charts of the explore chapter (08): attention-like maps of one sentence under shared controls."""

from __future__ import annotations

import textwrap

import altair as alt
import numpy as np

from .render import KEEP_WIDTH, token_axis, token_tooltip

# (x, y) axis titles of an attention map: columns are keys, rows are queries
ATTENTION_AXES = ("key (attended-to token)", "query (attending token)")
# The page's output column is 688 px; a row of two panels (token labels, axis titles, panels, a gap) fits
# in WIDTH px with the colour legends below the panels.
WIDTH = 680
LABEL_PX = 110  # room for an axis title and token labels ("44 bushfire"; longer ones are cut at LABEL_LIMIT)
LABEL_LIMIT = 72


def panel_size(n_panels: int, n_tokens: int) -> int:
    """Side of a square panel in px: 16 px a token, within what one row (one panel, or two) leaves."""
    if n_panels == 1:
        return max(180, min(440, 16 * n_tokens))
    return min((WIDTH - 2 * LABEL_PX - 20) // 2, max(180, 16 * n_tokens))


def _short(title: str) -> str:
    """A tooltip label from an axis title: "key (attended-to token)" -> "key"."""
    return title.split(" (")[0]


def attention_explorer(
    panels,
    tokens: list[str],
    title: str = "Attention",
    value_name: str = "weight",
    digits: int = 3,
    axis_titles: dict[str, tuple[str, str]] | None = None,
    value_names: dict[str, str] | None = None,
) -> alt.TopLevelMixin:
    """Heatmaps of attention-like (L, H, d_s, d_s) tensors with one layer slider and one head dropdown.

    ``panels`` is a tensor, or a dict {panel title: tensor} drawn two a row under shared controls; a panel
    of shape (L, d_s, d_s) does not depend on the head (e.g. token attributions). By default rows are
    queries (the attending token) and columns keys; ``axis_titles`` {panel title: (x title, y title)} names
    the axes of other maps, and ``value_names`` {panel title: name} their values (default ``value_name``).
    Layers are numbered 1..L. Values are shipped as integers in units of 10^-``digits``, each query row
    of a head as one string ("27,6,1,..."), the heads of a (panel, layer, row) together; the browser
    picks the head's string and splits it, which keeps the page small (about 3 bytes a cell at 3 digits).
    Two panels a row fit the page's 688 px output column (:func:`panel_size`; long token labels are cut,
    and every k-th token is labelled when they would crowd). Hovering a cell shows its two tokens.
    """
    if not isinstance(panels, dict):
        panels = {title: panels}
        title = None
    axis_titles, value_names = axis_titles or {}, value_names or {}
    L, n = next(iter(panels.values())).shape[0], len(tokens)  # layers, tokens d_s
    H = max(t.shape[1] for t in panels.values() if t.dim() == 4) if any(t.dim() == 4 for t in panels.values()) else 1
    layer = alt.param(name="layer", value=L, bind=alt.binding_range(min=1, max=L, step=1, name="layer "))
    head = alt.param(name="head", value=0, bind=alt.binding_select(options=list(range(H)), name="head "))
    size = panel_size(len(panels), n)
    scale = 10**digits
    charts = []
    for name, t in panels.items():
        per_head = t.dim() == 4
        if t.shape[0] != L or t.shape[-1] != n or t.shape[-2] != n or t.dim() not in (3, 4):
            raise ValueError(f"panel {name!r} has shape {tuple(t.shape)}, expected ({L}, [H,] {n}, {n})")
        a = np.rint(t.detach().double().numpy() * scale).astype(np.int64)
        # w: query row q as "12,0,3,..." (w[h] of head h, when the map has heads)
        joined = lambda r: ",".join(map(str, r.tolist()))  # noqa: E731
        rows = [
            {"layer": i + 1, "q": q, "w": [joined(r) for r in a[i, :, q]] if per_head else joined(a[i, q])}
            for i in range(L)
            for q in range(n)
        ]
        x_title, y_title = axis_titles.get(name, ATTENTION_AXES)
        value = value_names.get(name, value_name)
        y_axis = token_axis(tokens, y_title, size)
        y_axis.labelLimit = LABEL_LIMIT  # a long token is cut with "…"; the tooltip shows it whole
        chart = alt.Chart(alt.Data(values=rows), title=name).transform_filter(alt.datum.layer == layer)
        if per_head:
            chart = chart.transform_calculate(wrow=f"split(datum.w[{head.name}], ',')")
        else:
            chart = chart.transform_calculate(wrow="split(datum.w, ',')")
        charts.append(
            chart.transform_flatten(["wrow"])
            .transform_window(k1="row_number()", groupby=["layer", "q"])
            .transform_calculate(
                k="datum.k1 - 1",
                v=f"toNumber(datum.wrow) / {scale}",
                qt=token_tooltip(tokens, "q"),
                kt=token_tooltip(tokens, "k"),
            )
            .mark_rect()
            .encode(
                # one panel is a view of its own, whose drawn width the labels can follow on a narrow page
                x=alt.X("k:O", axis=token_axis(tokens, x_title, "width" if len(panels) == 1 else size)),
                y=alt.Y("q:O", axis=y_axis),
                color=alt.Color(
                    "v:Q",
                    title=value,
                    scale=alt.Scale(scheme="blues"),
                    legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=min(size, 160)),
                ),
                tooltip=[
                    alt.Tooltip("qt:N", title=_short(y_title)),
                    alt.Tooltip("kt:N", title=_short(x_title)),
                    alt.Tooltip("v:Q", title=value, format=f".{digits}f"),
                ],
            )
            .properties(width=size, height=size)
        )
    if len(charts) == 1:
        return charts[0].add_params(layer, head)
    if title:  # a long sentence as a one-line title would widen the chart past the page
        title = textwrap.wrap(title, 80)
    together = alt.concat(*charts, columns=2, title=title, usermeta=KEEP_WIDTH)  # labels thinned for `size`
    return together.add_params(layer, head).resolve_scale(color="independent")
