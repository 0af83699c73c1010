"""Charts of the comparison across models (chapter 9): per-layer curves of every model, overlaid, and each
fine-tune's change per layer. Its text is in :mod:`identifiability.text.across_models`."""

from __future__ import annotations

import altair as alt
import pandas as pd

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
    corpus most models have curves on, so the comparison shows), each only where there is a choice (a menu of
    one option changes nothing); colour is the model, the line style its role (pre-trained solid, fine-tuned
    dashed, random init dotted), in one legend."""
    labels = list(dict.fromkeys(df.label))
    corpora = sorted(df.corpus.unique())
    most = df.groupby("corpus").model.nunique().reindex(corpora)
    menus, shown = [], alt.datum.label == labels[0]
    if len(labels) > 1:
        bind = alt.binding_select(options=labels, name="quantity ")
        quantity = alt.param(name="quantity", value=labels[0], bind=bind)
        menus, shown = [quantity], alt.datum.label == quantity
    if len(corpora) > 1:
        bind = alt.binding_select(options=corpora, name="corpus ")
        corpus = alt.param(name="corpus", value=str(most.idxmax()), bind=bind)
        menus, shown = [*menus, corpus], shown & (alt.datum.corpus == corpus)
    y_title = "value of the chosen quantity" if len(labels) > 1 else labels[0]
    if len(corpora) == 1:
        title = alt.Title(title, subtitle=f"on {corpora[0]}")
    # One legend: colour and line style both keyed by the model (a model's dash is its role's), so each entry
    # shows the line as drawn.
    roles = df.drop_duplicates("model").set_index("model").role
    models = sorted(roles.index)
    dashes = {"pre-trained": [1, 0], "random init": [2, 2]}
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=400, symbolType="stroke", symbolSize=400)
    chart = (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer (0 = input embedding x)"),
            y=alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="model", scale=alt.Scale(domain=models), legend=legend),
            strokeDash=alt.StrokeDash(
                "model:N",
                title="model",
                scale=alt.Scale(domain=models, range=[dashes.get(roles[m], [6, 3]) for m in models]),
                legend=legend,
            ),
            tooltip=["model", "role", "corpus", "label", "layer", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    if menus:
        chart = chart.add_params(*menus)
    return chart.transform_filter(shown).properties(width=560, height=300)


def differences_chart(ft, title: str) -> alt.Chart:
    """d_l, a fine-tuned model's (or the control's) minus the reference's identifiability rate per layer, with
    95% intervals (``ft``: a ``verdicts.across_models.FineTuning``), one colour per fine-tuned task and the
    random-initialisation control."""
    rows = []
    series = {**ft.tasks, **({"random init": ft.control} if ft.control is not None else {})}
    for name, p in series.items():
        for layer, d in enumerate(p.layers, start=1):
            rows.append({"model": name, "layer": layer, "d": d.estimate, "low": d.low, "high": d.high})
    df = pd.DataFrame(rows, columns=["model", "layer", "d", "low", "high"])
    y_title = "rate − the reference's rate"
    base = alt.Chart(df, title=title).encode(
        x=alt.X("layer:O", title="layer l"),
        color=alt.Color("model:N", title="fine-tuned task or control", legend=alt.Legend(orient="bottom")),
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(strokeDash=[4, 4], color="#555").encode(y="y:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("d:Q", title=y_title),
        tooltip=["model", "layer", alt.Tooltip("d:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
                 alt.Tooltip("high:Q", format=".3f")],
    )  # fmt: skip
    bars = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q")
    return (zero + bars + line).properties(width=560, height=260, title=title)
