"""Charts of the explore chapter (07): attention-like maps of one sentence under shared controls."""

from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from .render import token_axis


def attention_explorer(
    panels, tokens: list[str], title: str = "Attention", value_name: str = "weight", digits: int = 3
) -> alt.TopLevelMixin:
    """Heatmaps of attention-like (L, H, d_s, d_s) tensors with one layer slider and one head dropdown.

    ``panels`` is a tensor, or a dict {panel title: tensor} drawn side by side under shared controls; a
    panel of shape (L, d_s, d_s) does not depend on the head (e.g. token attributions). Rows are queries
    (the attending token), columns are keys. Layers are numbered 1..L. Each (panel, layer, head, query)
    row is shipped as one array and flattened in the browser, which keeps the page small (about 6 bytes
    per cell).
    """
    if not isinstance(panels, dict):
        panels = {title: panels}
        title = None
    L, n = next(iter(panels.values())).shape[0], len(tokens)  # layers, tokens d_s
    H = max(t.shape[1] for t in panels.values() if t.dim() == 4) if any(t.dim() == 4 for t in panels.values()) else 1
    layer = alt.param(name="layer", value=L, bind=alt.binding_range(min=1, max=L, step=1, name="layer "))
    head = alt.param(name="head", value=0, bind=alt.binding_select(options=list(range(H)), name="head "))
    # Two panels a row at most, each small enough that a row fits the book's ~750 px text column.
    size = max(180, min(440 if len(panels) == 1 else 215, 16 * n))
    charts = []
    for name, t in panels.items():
        t4 = t if t.dim() == 4 else t[:, None]
        if t4.shape[0] != L or t4.shape[-1] != n:
            raise ValueError(f"panel {name!r} has shape {tuple(t.shape)}, expected ({L}, [H,] {n}, {n})")
        a = t4.detach().double().reshape(-1, n).numpy().round(digits)
        idx = pd.MultiIndex.from_product(
            [range(1, L + 1), range(t4.shape[1]) if t.dim() == 4 else [-1], range(n)], names=["layer", "head", "q"]
        )
        df = pd.DataFrame({"w": [r.tolist() for r in a]}, index=idx).reset_index()
        charts.append(
            alt.Chart(df, title=name)
            .transform_filter((alt.datum.layer == layer) & ((alt.datum.head == head) | (alt.datum.head == -1)))
            .transform_flatten(["w"])
            .transform_window(k1="row_number()", groupby=["layer", "head", "q"])
            .transform_calculate(k="datum.k1 - 1")
            .mark_rect()
            .encode(
                x=alt.X("k:O", axis=token_axis(tokens, "key (attended-to token)")),
                y=alt.Y("q:O", axis=token_axis(tokens, "query (attending token)")),
                color=alt.Color("w:Q", title=value_name, scale=alt.Scale(scheme="blues")),
                tooltip=[
                    alt.Tooltip("q:O", title="query"),
                    alt.Tooltip("k:O", title="key"),
                    alt.Tooltip("w:Q", title=value_name, format=".3f"),
                ],
            )
            .properties(width=size, height=size)
        )
    if len(charts) == 1:
        return charts[0].add_params(layer, head)
    if title:  # a long sentence as a one-line title would widen the chart past the page
        title = textwrap.wrap(title, 90)
    return alt.concat(*charts, columns=2, title=title).add_params(layer, head).resolve_scale(color="independent")
