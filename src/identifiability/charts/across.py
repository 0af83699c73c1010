"""Charts of the comparison across models (chapter 8): per-layer curves of every model, overlaid."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..across import labels

VERDICT_COLOURS = {
    "holds": "#1a9850",
    "partly holds": "#a6d96a",
    "inconclusive": "#bdbdbd",
    "fails": "#d73027",
    "not testable on this model": "#ffffff",
    "not run in this build": "#e9ecef",
}


def curves_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Overlaid per-layer curves (``across.curves``): a menu picks the quantity and one the corpus (first: the
    corpus most models have curves on, so the comparison shows); colour is the model, the line style its role
    (pre-trained solid, fine-tuned dashed, random init dotted), in one legend."""
    labels = list(dict.fromkeys(df.label))
    corpora = sorted(df.corpus.unique())
    most = df.groupby("corpus").model.nunique().reindex(corpora)
    quantity = alt.param(name="quantity", value=labels[0], bind=alt.binding_select(options=labels, name="quantity "))
    corpus = alt.param(
        name="corpus", value=str(most.idxmax()), bind=alt.binding_select(options=corpora, name="corpus ")
    )
    # One legend: colour and line style both keyed by the model (a model's dash is its role's), so each entry
    # shows the line as drawn.
    roles = df.drop_duplicates("model").set_index("model").role
    models = sorted(roles.index)
    dashes = {"pre-trained": [1, 0], "random init": [2, 2]}
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=400, symbolType="stroke", symbolSize=400)
    return (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer (0 = input embedding x)"),
            y=alt.Y("value:Q", title="value of the chosen quantity", scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="model", scale=alt.Scale(domain=models), legend=legend),
            strokeDash=alt.StrokeDash(
                "model:N",
                title="model",
                scale=alt.Scale(domain=models, range=[dashes.get(roles[m], [6, 3]) for m in models]),
                legend=legend,
            ),
            tooltip=["model", "role", "corpus", "label", "layer", alt.Tooltip("value:Q", format=".3f")],
        )
        .add_params(quantity, corpus)
        .transform_filter((alt.datum.label == quantity) & (alt.datum.corpus == corpus))
        .properties(width=560, height=300)
    )


def no_separator_text(models: list[str]) -> str:
    """One sentence naming the models whose tokenizer adds no separator to a sentence ("" if there are none)."""
    if not models:
        return ""
    names = ", ".join(f"**{m}**" for m in models)
    it = "its" if len(models) == 1 else "their"
    return f"The separator curves have no line for {names}: {it} tokenizer adds no separator token to a sentence."


def comparison_text(c, seed: int) -> str:
    """Which models the table lets the page compare (``c``: a studies.across.Comparison)."""
    listed = "\n".join(f"- **{name}**: `{key}`" for key, name in labels(c.model_table).items())
    text = (
        f"The table holds {c.table_rows:,} rows from {c.runs} chapter runs of {c.models_in_table} model(s); with "
        f"seed {seed} and shared parameters, {c.models} model(s) can be compared:\n\n{listed}"
    )
    if c.models < 2:
        text += (
            "\n\nOnly one model has results: run `make compare` (or `identifiability sweep --models ...`) to add "
            "fine-tuned models and the random-initialisation control, then rebuild the book."
        )
    return text
