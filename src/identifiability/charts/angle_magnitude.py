"""Charts of the angle-versus-magnitude chapter (05): the probes' rates per lookup and per ablation, and the
norms and angles of the hidden states. Its text is in :mod:`identifiability.text.angle_magnitude`."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..identity import LOOKUPS, LOSSES, MAPPINGS
from .render import combined_choice, dash_legend, dropdown


def _label_training(loss: str, lookup: str) -> str:
    return f"{loss} loss, {lookup} lookup"


def combo_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per (training loss, lookup) pair; a dropdown picks the mapping.

    The naive map has no training loss: its two lookups appear as "— / l2" and "— / cos"."""
    df = rates[["mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["pair"] = np.where(df.mapping == "naive", "—", df.loss) + " loss / " + df.lookup + " lookup"
    mapping = dropdown("mapping", [m for m in MAPPINGS if m in set(df.mapping)], "linear")
    base = alt.Chart(df).transform_filter(alt.datum.mapping == mapping).encode(x=alt.X("layer:O", title="layer l"))
    shown = base.encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("pair:N", title="training loss / lookup"),
        tooltip=["mapping", "loss", "lookup", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    lines = shown.mark_line().encode(strokeDash=alt.StrokeDash("lookup:N", title="lookup", legend=dash_legend()))
    chance = base.mark_line(color="crimson", strokeDash=[2, 2]).encode(y="chance:Q")
    return (
        alt.layer(lines, shown.mark_point(filled=True), chance)
        .add_params(mapping)
        .properties(title=title, width=460, height=280)
    )


def ablation_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per ablation; one dropdown picks the training loss and
    the lookup (:func:`.render.combined_choice`).

    ``df`` columns: ablation, loss ("none" for maps without training), lookup, layer, rate, chance."""
    df = df[["ablation", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    fixed = df[df.loss == "none"]
    df = pd.concat([df[df.loss != "none"]] + [fixed.assign(loss=k) for k in LOSSES], ignore_index=True)
    df, params, sel = combined_choice(
        df,
        ["loss", "lookup"],
        [list(LOSSES), list(LOOKUPS)],
        ["rate", "chance"],
        _label_training,
        ("cos", "cos"),
        "probe",
    )
    base = alt.Chart(df).transform_filter(sel).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("ablation:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
        tooltip=["ablation", "probe", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    chance = (
        base.transform_filter(alt.datum.ablation == df.ablation.iloc[0])
        .mark_line(color="crimson", strokeDash=[2, 2])
        .encode(y="chance:Q")
    )
    return alt.layer(lines, chance).add_params(*params).properties(title=title, width=460, height=280)


def norm_chart(summary: pd.DataFrame, hist: pd.DataFrame, title: str) -> alt.HConcatChart:
    """Left: |e_i^l| per layer (whiskers 5-95 %, box 25-75 %, tick median). Right: the distribution of
    |e_i^l| / median at one layer, chosen with a slider."""
    s = summary.round(3)
    base = alt.Chart(s).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    whisk = base.mark_rule().encode(y=alt.Y("q05:Q", title="|e_i^l|"), y2="q95:Q")
    box = base.mark_bar(size=18, opacity=0.6).encode(
        y="q25:Q", y2="q75:Q", tooltip=["layer", "q05", "q25", "median", "q75", "q95"]
    )
    med = base.mark_tick(color="black", size=18, thickness=2).encode(y="median:Q")
    left = alt.layer(whisk, box, med).properties(title=title, width=250, height=260)
    h = hist.round(4)
    layer = alt.param(
        name="norm_layer",
        value=int(h.layer.max()),
        bind=alt.binding_range(min=0, max=int(h.layer.max()), step=1, name="layer "),
    )
    right = (
        alt.Chart(h)
        .transform_filter(alt.datum.layer == layer)
        .mark_bar()
        .encode(
            x=alt.X("lo:Q", bin="binned", title="|e_i^l| / median of the layer (last bin: all above)"),
            x2="hi:Q",
            y=alt.Y("share:Q", title="share of tokens"),
            tooltip=[alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
        )
        .add_params(layer)
        .properties(title="Distribution at one layer", width=250, height=260)
    )
    return alt.hconcat(left, right)


def angle_chart(angles: pd.DataFrame, title: str) -> alt.Chart:
    """Angle between e_i^l and its own x_i (median, 25-75 % band) against the mean angle to the other
    tokens' x_j of the same sentence, per layer."""
    a = angles.round(3)
    base = alt.Chart(a).encode(x=alt.X("layer:O", title="layer l"))
    band = base.mark_area(opacity=0.25, color="#1f77b4").encode(
        y=alt.Y("q25:Q", title="angle (degrees)", scale=alt.Scale(domain=[0, 120])), y2="q75:Q"
    )
    own = base.mark_line(point=True, color="#1f77b4").encode(
        y="median:Q",
        tooltip=[
            "layer",
            alt.Tooltip("median:Q", title="median angle to own x_i", format=".1f"),
            alt.Tooltip("closest_share:Q", title="own x_i is the closest", format=".3f"),
        ],
    )
    other = base.mark_line(point=True, color="gray", strokeDash=[4, 3]).encode(
        y="other_mean:Q", tooltip=["layer", alt.Tooltip("other_mean:Q", title="mean angle to other x_j", format=".1f")]
    )
    rule = alt.Chart(pd.DataFrame({"y": [90]})).mark_rule(color="lightgray").encode(y="y:Q")
    return alt.layer(rule, band, own, other).properties(title=title, width=460, height=260)
