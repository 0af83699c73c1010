"""Charts of the token-identity chapter (04); its text is in :mod:`identifiability.text.token_identity`.

Layer on the x axis; a dropdown chooses the probe (mapping, its training loss and the lookup). Data frames
in (as computed by :mod:`identifiability.identity`), Altair charts out.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
from altair.expr.core import Expression

from ..identity import CANDIDATES, LOOKUPS, LOSSES, MAPPINGS
from .render import combined_choice, dash_legend, dropdown, plain_notation
from .verdicts import TWIN_COLOUR


def _label_probe(mapping: str, loss: str, lookup: str) -> str:
    if mapping == "naive":
        return f"identity map, {lookup} lookup"
    return f"{mapping} map, {loss} loss, {lookup} lookup"


def _probe_choice(
    df: pd.DataFrame, naive: bool, measures: list[str], default: str | None = None
) -> tuple[pd.DataFrame, list[alt.Parameter], Expression]:
    """One dropdown over the probes, mapping × training loss × lookup (:func:`.render.combined_choice`); returns
    (df with a column ``probe``, params, filter). With ``naive`` the identity map (no training loss) is a
    probe too. Separate menus would each have to be live in every view of the others, which they are not:
    with the identity map chosen (it has no training loss), the loss menu changes nothing."""
    if not naive:
        df = df[df.mapping != "naive"]
    mappings = [m for m in MAPPINGS if m in set(df.mapping)]
    default = default if default in mappings else mappings[0]
    return combined_choice(
        df,
        ["mapping", "loss", "lookup"],
        [mappings, ["none", *LOSSES], list(LOOKUPS)],
        measures,
        _label_probe,
        (default, "none" if default == "naive" else "cos", "cos"),
        "probe",
    )


def rate_chart(
    rates: pd.DataFrame,
    title: str,
    paper_value: float | None = None,
    paper_label: str = "paper",
    twin: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """Identification rate per layer. ``rates`` has columns mapping, loss, lookup, candidates, split,
    layer, rate, chance. Dropdowns choose the trained mapping, its loss, the lookup and the candidate
    set; the naive baseline (same lookup and candidates) and chance are drawn with it. ``twin``: the same
    rates on the model's untrained twin, whose test-split curve of the chosen probe is drawn beside."""
    df = rates[["mapping", "loss", "lookup", "candidates", "split", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["chance"] = df["chance"].round(4)
    trained = sorted(set(df.mapping) - {"naive"}, key=MAPPINGS.index)
    mapping = dropdown("mapping", trained)
    loss = dropdown("loss", [k for k in LOSSES if k in set(df.loss)], "cos")
    lookup = dropdown("lookup", [k for k in LOOKUPS if k in set(df.lookup)], "cos")
    cands = dropdown("candidates", [c for c in CANDIDATES if c in set(df.candidates)])
    base = alt.Chart(df).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    y = alt.Y("rate:Q", title="identified tokens (share)", scale=alt.Scale(domain=[0, 1]))
    sel = (
        (alt.datum.mapping == mapping)
        & (alt.datum.loss == loss)
        & (alt.datum.lookup == lookup)
        & (alt.datum.candidates == cands)
    )
    chosen = base.transform_filter(sel).encode(
        y=y,
        color=alt.value("#1f77b4"),
        tooltip=["mapping", "loss", "lookup", "candidates", "split", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    split = alt.StrokeDash("split:N", title="split", sort=["test", "train"], legend=dash_legend())
    probe = chosen.mark_line().encode(strokeDash=split) + chosen.mark_point(filled=True).encode(detail="split:N")
    nsel = (
        (alt.datum.mapping == "naive")
        & (alt.datum.lookup == lookup)
        & (alt.datum.candidates == cands)
        & (alt.datum.split == "test")
    )
    naive = (
        base.transform_filter(nsel)
        .mark_line(point=True, color="gray")
        .encode(y=y, tooltip=[alt.Tooltip("rate:Q", format=".3f", title="naive (identity map)"), "layer"])
    )
    chance = (
        base.transform_filter(nsel)
        .mark_line(color="crimson", strokeDash=[2, 2])
        .encode(y="chance:Q", tooltip=[alt.Tooltip("chance:Q", format=".3f")])
    )
    layers = [probe, naive, chance]
    if twin is not None:
        tw = twin[twin.split == "test"][["mapping", "loss", "lookup", "candidates", "layer", "rate"]].copy()
        tw["rate"] = tw["rate"].round(4)
        picked = alt.Chart(tw).transform_filter(sel).encode(x="layer:O", y=y)
        layers += [
            picked.mark_line(color=TWIN_COLOUR, strokeDash=[6, 3], point=True).encode(
                tooltip=["layer", alt.Tooltip("rate:Q", format=".3f", title="untrained twin")]
            )
        ]
    if paper_value is not None:
        last = int(df.layer.max())
        ref = pd.DataFrame({"layer": [last], "rate": [paper_value], "label": [f"{paper_label}: {paper_value:.0%}"]})
        pt = (
            alt.Chart(ref)
            .mark_point(shape="diamond", size=120, color="darkorange", filled=True)
            .encode(x="layer:O", y="rate:Q", tooltip=["label"])
        )
        tx = (
            alt.Chart(ref)
            .mark_text(dx=-10, dy=14, align="right", color="darkorange")
            .encode(x="layer:O", y="rate:Q", text="label")
        )
        layers += [pt, tx]
    subtitle = "blue: the chosen probe (solid: test, dashed: train); grey: identity map; red dotted: chance"
    if twin is not None:
        subtitle = [subtitle, "purple dashed: the same probe on the untrained twin (test)"]
    return (
        alt.layer(*layers)
        .add_params(mapping, loss, lookup, cands)
        .properties(title=alt.TitleParams(title, subtitle=subtitle), width=460, height=280)
    )


def overlay_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test-split rates per layer with one line per ``series`` (e.g. corpus); one dropdown chooses the probe
    (:func:`_probe_choice`), the naive map included."""
    df = rates[["series", "mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df, params, sel = _probe_choice(df, naive=True, measures=["rate", "chance"], default="linear")
    base = alt.Chart(df).transform_filter(sel).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None),
        tooltip=["series", "probe", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    chance = base.mark_line(strokeDash=[2, 2]).encode(y="chance:Q", color=alt.Color("series:N"), opacity=alt.value(0.5))
    return alt.layer(lines, chance).add_params(*params).properties(title=title, width=460, height=280)


def generalisation_chart(gen: pd.DataFrame, title: str) -> alt.Chart:
    """Heatmap: rows the layer a probe was trained on, columns the layer it is tested on."""
    df = gen[["mapping", "loss", "lookup", "layer", "test_layer", "rate"]].copy()
    df["rate"] = df["rate"].round(3)
    df, params, sel = _probe_choice(df, naive=False, measures=["rate"])
    base = (
        alt.Chart(df)
        .transform_filter(sel)
        .encode(x=alt.X("test_layer:O", title="tested on layer"), y=alt.Y("layer:O", title="trained on layer"))
    )
    rect = base.mark_rect().encode(
        color=alt.Color("rate:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"), title="identified"),
        tooltip=["probe", "layer", "test_layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("rate:Q", format=".2f"),
        color=alt.condition(alt.datum.rate > 0.6, alt.value("black"), alt.value("white")),
    )
    return alt.layer(rect, text).add_params(*params).properties(title=title, width=320, height=260)


def neighbour_chart(nb: pd.DataFrame, title: str) -> alt.Chart:
    """Share of tokens whose nearest same-sentence input embedding is x_{i+k}, per layer, one line per k.
    The title's notation shows as Unicode scripts (:func:`identifiability.charts.render.plain_notation`)."""
    df = nb[nb.offset != 0][["mapping", "loss", "lookup", "layer", "offset", "share", "chance"]].copy()
    df["share"] = df["share"].round(4)
    df, params, sel = _probe_choice(df, naive=True, measures=["share", "chance"], default="linear")
    return (
        alt.Chart(df)
        .transform_filter(sel)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer l"),
            y=alt.Y("share:Q", title="nearest candidate is xᵢ₊ₖ (share of tokens)"),
            color=alt.Color(
                "offset:O",
                title="k",
                scale=alt.Scale(
                    domain=[-3, -2, -1, 1, 2, 3],
                    range=["#fcae91", "#fb6a4a", "#cb181d", "#08519c", "#3182bd", "#9ecae1"],
                ),
            ),
            tooltip=[
                "probe",
                "offset",
                "layer",
                alt.Tooltip("share:Q", format=".3f"),
                alt.Tooltip("chance:Q", format=".3f"),
            ],
        )
        .add_params(*params)
        .properties(title=plain_notation(title), width=460, height=260)
    )


def epochs_chart(curves: pd.DataFrame, title: str) -> alt.Chart:
    """Validation rate (cosine lookup among the sentence's tokens) of every probe after each epoch, one line
    per probe; probes whose early stopping triggered in grey, probes that reached the epoch cap in colour.
    ``curves``: :func:`identifiability.identity.rate_curves`."""
    df = curves.copy()
    df["rate"] = df["rate"].round(4)
    df["probe"] = df.mapping + " / " + df.loss + " loss / layer " + df.layer.astype(str)
    df["stopping"] = np.where(df["stopped early"], "stopped early", "reached the epoch cap")
    return (
        alt.Chart(df.drop(columns="stopped early"))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("epoch:Q", title="epoch (0 = initial weights)"),
            y=alt.Y("rate:Q", title="identified validation tokens (share)"),
            detail="probe:N",
            color=alt.Color(
                "stopping:N",
                title=None,
                scale=alt.Scale(domain=["reached the epoch cap", "stopped early"], range=["#d62728", "#bbbbbb"]),
            ),
            tooltip=["probe", "epoch", alt.Tooltip("rate:Q", format=".3f"), "stopping"],
        )
        .properties(title=title, width=460, height=260)
    )
