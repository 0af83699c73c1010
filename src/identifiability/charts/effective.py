"""Charts of the effective-attention chapter (03): Figure 1 panels and the head viewer."""

from __future__ import annotations

import json
from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .render import sentence_label_expr


def figure1_chart(fig1: pd.DataFrame, d_v: int) -> alt.FacetChart:
    """Figure 1 (a): Pearson(A, A_eff) against d_s per layer; median over heads and inputs (line), 10-90% and
    min-max (bands), d_s = d_v dashed. ``fig1``: rows of :func:`identifiability.effective.correlation_by_length`."""
    agg = (
        fig1.groupby(["d_s", "layer"])
        .pearson.agg(median="median", q10=lambda x: x.quantile(0.1), q90=lambda x: x.quantile(0.9), lo="min", hi="max")
        .reset_index()
        .round(4)
    )
    base = alt.Chart().encode(x=alt.X("d_s:Q", scale=alt.Scale(type="log"), title="tokens d_s"))
    return (
        alt.layer(
            base.mark_area(opacity=0.15, color="steelblue").encode(
                y=alt.Y("lo:Q", title="Pearson(A, A_eff)"), y2="hi:Q"
            ),
            base.mark_area(opacity=0.35, color="steelblue").encode(y="q10:Q", y2="q90:Q"),
            base.mark_line(color="navy", point=alt.OverlayMarkDef(size=12)).encode(
                y="median:Q", tooltip=["d_s", "layer", "median", "q10", "q90", "lo", "hi"]
            ),
            alt.Chart().mark_rule(color="crimson", strokeDash=[4, 3]).encode(x=alt.datum(d_v)),
            data=agg,
        )
        .properties(width=260, height=160)
        .facet(
            facet=alt.Facet("layer:O", title="layer"),
            columns=2,
            title=f"Raw vs effective attention: median over heads (line), 10-90% and min-max (bands); "
            f"d_s = d_v = {d_v} dashed",
        )
    )


def null_share_chart(fig1: pd.DataFrame, d_v: int) -> alt.LayerChart:
    """Median share of raw attention's Frobenius norm in the null part, per layer, against d_s."""
    share = fig1.groupby(["d_s", "layer"]).null_share.median().reset_index().round(4)
    line = (
        alt.Chart(share, title="Share of raw attention (Frobenius norm) in the null part, median over heads")
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("d_s:Q", scale=alt.Scale(type="log"), title="tokens d_s"),
            y=alt.Y("null_share:Q", title="‖A − A_eff‖ / ‖A‖"),
            color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis")),
            tooltip=["d_s", "layer", "null_share"],
        )
        .properties(width=420, height=220)
    )
    return line + alt.Chart(share).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x=alt.datum(d_v))


def mass_chart(mass: pd.DataFrame, order: Sequence[str]) -> alt.FacetChart:
    """Attention mass by key category, raw next to effective: points are heads, ticks their mean per layer.
    ``mass``: rows of :func:`identifiability.effective.attention_mass`; ``order``: the categories shown."""
    m = mass.melt(
        id_vars=["layer", "head", "category"], value_vars=["raw", "effective"], var_name="kind", value_name="mass"
    ).round(4)
    order = list(order)
    pts = (
        alt.Chart()
        .mark_circle(size=18, opacity=0.45)
        .encode(
            x=alt.X("layer:O"),
            xOffset=alt.XOffset("category:N", sort=order),
            y=alt.Y("mass:Q", title="attention mass (per head, mean over queries and sentences)"),
            color=alt.Color("category:N", sort=order, scale=alt.Scale(scheme="set1")),
            tooltip=["kind", "layer", "head", "category", "mass"],
        )
    )
    mean = (
        alt.Chart()
        .mark_tick(thickness=3, size=14)
        .encode(
            x="layer:O",
            xOffset=alt.XOffset("category:N", sort=order),
            y="mean(mass):Q",
            color=alt.Color("category:N", sort=order),
        )
    )
    return (
        alt.layer(pts, mean, data=m)
        .properties(width=250, height=240)
        .facet(
            column=alt.Column("kind:N", sort=["raw", "effective"], title=None),
            title="Attention mass by key category: points are heads, ticks their mean",
        )
    )


def separator_chart(seps: pd.DataFrame) -> alt.Chart:
    """Attention mass on the separator between two segments and on the final one, per layer, raw (solid) and
    effective (dashed); from :func:`identifiability.effective.separator_mass`."""
    long = seps.melt(id_vars=["layer", "separator"], value_vars=["raw", "effective"], var_name="attention")
    return (
        alt.Chart(long, title="Attention mass on the two separators of a sentence pair")
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("value:Q", title="mean attention mass on the separator"),
            color=alt.Color("separator:N", title="separator", sort=["first", "second"]),
            strokeDash=alt.StrokeDash("attention:N", title="attention", sort=["raw", "effective"]),
            tooltip=["layer", "separator", "attention", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=420, height=220)
    )


def head_viewer(
    examples: Sequence[tuple[list[str], torch.Tensor, torch.Tensor]],
    labels: Sequence[str] | None = None,
    digits: int = 3,
    size: int = 180,  # three panels a row, with the query labels, fit the page's 688 px output column
) -> alt.HConcatChart:
    """Raw, effective and null attention side by side, with a sentence dropdown, a layer slider and a head
    dropdown; works in a static page (Altair params, no Python callbacks).

    Args:
        examples: per sentence ``(tokens, raw (L, H, d_s, d_s), effective (L, H, d_s, d_s))``.
        labels: dropdown labels of the sentences (default: their first words).
        digits: decimals kept; values are shipped as integers in units of 10^-digits.

    Page weight: one record per (sentence, layer, head) holds the whole matrix of raw and of effective
    attention, each as one string of comma-separated integers (a string is one token in the page's JSON,
    and in the notebook file, where a list would take a line per number). The browser splits and flattens
    them, recovers query and key from the position, and computes the null part as raw - effective.
    """
    scale = 10**digits
    recs = []
    tokens = []

    def encode(m: torch.Tensor) -> list[list[str]]:
        ints = (m.double() * scale).round().to(torch.int64)
        L, H, n, _ = ints.shape
        return [[",".join(map(str, ints[layer, h].flatten().tolist())) for h in range(H)] for layer in range(L)]

    for s, (toks, raw, eff) in enumerate(examples):
        L, H, n, _ = raw.shape
        r, e = encode(raw), encode(eff)
        tokens.append([f"{i} {t}" for i, t in enumerate(toks)])
        for layer in range(L):
            for h in range(H):
                recs.append({"s": s, "layer": layer + 1, "head": h, "n": n, "r": r[layer][h], "e": e[layer][h]})
    L, H = examples[0][1].shape[:2]
    labels = (
        list(labels)
        if labels is not None
        else [
            f"{i}: {' '.join(t for t in toks[1:6])} … ({len(toks)} tokens)" for i, (toks, _, _) in enumerate(examples)
        ]
    )
    sentence = alt.param(
        name="sentence",
        value=0,
        bind=alt.binding_select(options=list(range(len(examples))), labels=labels, name="sentence "),
    )
    layer = alt.param(name="layer", value=L, bind=alt.binding_range(min=1, max=L, step=1, name="layer "))
    head = alt.param(name="head", value=0, bind=alt.binding_select(options=list(range(H)), name="head "))
    tok_json = json.dumps(tokens)

    def axis(title: str) -> alt.Axis:
        return alt.Axis(
            title=title, labelExpr=sentence_label_expr(tokens, size, label_px=9), labelOverlap=False, labelFontSize=8
        )

    base = (
        alt.Chart(pd.DataFrame(recs))
        .transform_filter((alt.datum.s == sentence) & (alt.datum.layer == layer) & (alt.datum.head == head))
        .transform_calculate(rv="split(datum.r, ',')", ev="split(datum.e, ',')")
        .transform_flatten(["rv", "ev"])
        .transform_window(i="row_number()", groupby=["s", "layer", "head"])
        .transform_calculate(
            q="floor((datum.i - 1) / datum.n)",
            k="(datum.i - 1) % datum.n",
            raw=f"toNumber(datum.rv) / {scale}",
            effective=f"toNumber(datum.ev) / {scale}",
            null=f"(toNumber(datum.rv) - toNumber(datum.ev)) / {scale}",
        )
        .transform_calculate(query=f"{tok_json}[sentence][datum.q]", key=f"{tok_json}[sentence][datum.k]")
        .mark_rect()
        .properties(width=size, height=size)
    )

    def panel(field: str, title: str, scheme: str, mid: bool) -> alt.Chart:
        color = alt.Color(
            f"{field}:Q",
            title=field,
            legend=alt.Legend(orient="bottom", gradientLength=size - 40),
            scale=alt.Scale(scheme=scheme, domainMid=0) if mid else alt.Scale(scheme=scheme),
        )
        return base.encode(
            x=alt.X("k:O", axis=axis("key")),
            y=alt.Y("q:O", axis=axis("query") if field == "raw" else alt.Axis(title=None, labels=False)),
            color=color,
            tooltip=[
                alt.Tooltip("query:N"),
                alt.Tooltip("key:N"),
                alt.Tooltip("raw:Q", format=".3f"),
                alt.Tooltip("effective:Q", format=".3f"),
                alt.Tooltip("null:Q", format=".3f"),
            ],
        ).properties(title=title)

    return (
        alt.hconcat(
            panel("raw", "raw A", "blues", False),
            panel("effective", "effective A_eff", "redblue", True),
            panel("null", "null part A − A_eff", "redblue", True),
        )
        .resolve_scale(color="independent")
        .add_params(sentence, layer, head)
    )
