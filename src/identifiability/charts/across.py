"""Charts of the comparison across models (chapter 8): per-layer curves of every model, overlaid."""

from __future__ import annotations

import altair as alt
import pandas as pd

VERDICT_COLOURS = {
    "holds": "#1a9850",
    "partly holds": "#a6d96a",
    "inconclusive": "#bdbdbd",
    "fails": "#d73027",
    "not testable on this model": "#ffffff",
}


def curves_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Overlaid per-layer curves (``across.curves``): a menu picks the quantity and one the corpus; colour
    is the model, the line style its role (pre-trained solid, fine-tuned dashed, random init dotted)."""
    labels = list(dict.fromkeys(df.label))
    corpora = sorted(df.corpus.unique())
    quantity = alt.param(name="quantity", value=labels[0], bind=alt.binding_select(options=labels, name="quantity "))
    corpus = alt.param(name="corpus", value=corpora[0], bind=alt.binding_select(options=corpora, name="corpus "))
    dash = alt.Scale(
        domain=sorted(df.role.unique()),
        range=[
            [1, 0] if r == "pre-trained" else [2, 2] if r == "random init" else [6, 3] for r in sorted(df.role.unique())
        ],
    )
    return (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer (0 = input embedding x)"),
            y=alt.Y("value:Q", title="value of the chosen quantity", scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="model", legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)),
            strokeDash=alt.StrokeDash("role:N", title="role", scale=dash, legend=alt.Legend(orient="bottom")),
            tooltip=["model", "role", "corpus", "label", "layer", alt.Tooltip("value:Q", format=".3f")],
        )
        .add_params(quantity, corpus)
        .transform_filter((alt.datum.label == quantity) & (alt.datum.corpus == corpus))
        .properties(width=560, height=300)
    )
