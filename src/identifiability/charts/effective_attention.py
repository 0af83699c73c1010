"""Charts of the effective-attention chapter (03): Figure 1 panels and the head viewer. The sentences the
chapter states its measurements in are in :mod:`identifiability.text.effective_attention`."""

from __future__ import annotations

import json
from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

from .render import KEEP_WIDTH, dash_legend, sentence_label_expr
from .verdicts import TWIN_COLOUR

FIG1_CURVES = {  # column of the correlation table -> its curve on Figure 1 (a)
    "pearson": "model: Pearson(A, A_eff)",
    "pearson_random": "random subspace of the same rank",
    "pearson_random_weights": "random value weights, same inputs",
}


TWIN_CURVE = "untrained twin: Pearson(A, A_eff)"


def figure1_chart(fig1: pd.DataFrame, d_v: int, twin: pd.DataFrame | None = None) -> alt.LayerChart:
    """Figure 1 (a): Pearson(A, A_eff) against d_s beside the two null models: the median over heads and inputs
    of each (lines), the 10-90% band over heads and inputs of the model and of the random subspace, d_s = d_v
    dashed. ``fig1``: rows of :func:`identifiability.effective.projection.correlation_by_length`; ``twin``: the same
    rows
    of the model's untrained twin, whose median is drawn beside them (dashed, the twin's colour)."""
    cols = [c for c in FIG1_CURVES if c in fig1 and fig1[c].notna().any()]
    long = fig1.melt(id_vars=["d_s"], value_vars=cols, var_name="curve", value_name="r")
    agg = (
        long.groupby(["d_s", "curve"])
        .r.agg(median="median", q10=lambda x: x.quantile(0.1), q90=lambda x: x.quantile(0.9))
        .reset_index()
        .assign(curve=lambda d: d.curve.map(FIG1_CURVES))
        .round(4)
    )
    order = [FIG1_CURVES[c] for c in cols]
    palette = ["navy", "darkorange", "seagreen"][: len(order)]
    if twin is not None:
        tw = twin.groupby("d_s").pearson.agg(median="median").reset_index().round(4).assign(curve=TWIN_CURVE)
        agg = pd.concat([agg, tw], ignore_index=True)
        order, palette = [*order, TWIN_CURVE], [*palette, TWIN_COLOUR]
    color = alt.Color(
        "curve:N",
        sort=order,
        title=None,
        legend=alt.Legend(orient="bottom", columns=2),
        scale=alt.Scale(domain=order, range=palette),
    )
    base = alt.Chart(agg).encode(x=alt.X("d_s:Q", scale=alt.Scale(type="log"), title="tokens d_s"))
    bands = base.transform_filter(alt.datum.curve != FIG1_CURVES["pearson_random_weights"]).mark_area(opacity=0.18)
    return alt.layer(
        bands.transform_filter(alt.datum.curve != TWIN_CURVE).encode(
            y=alt.Y("q10:Q", title="Pearson correlation with A"), y2="q90:Q", color=color
        ),
        base.mark_line(point=alt.OverlayMarkDef(size=14)).encode(
            y="median:Q",
            color=color,
            strokeDash=alt.condition(alt.datum.curve == TWIN_CURVE, alt.value([6, 3]), alt.value([1, 0])),
            tooltip=["d_s", "curve", "median", "q10", "q90"],
        ),
        alt.Chart(agg).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x=alt.datum(d_v)),
    ).properties(
        width=560,
        height=260,
        title=[
            "Raw vs effective attention beside two null models"
            + (" and the untrained twin (dashed)" if twin is not None else ""),
            f"medians over heads and inputs, 10-90% bands; d_s = d_v = {d_v} dashed",
        ],
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


def mass_chart(mass: pd.DataFrame, labels: dict[str, str]) -> alt.FacetChart:
    """Attention mass by key category, raw next to effective: points are heads, ticks their mean per layer.
    ``mass``: rows of :func:`identifiability.effective.projection.attention_mass`; ``labels``: category -> its label
    (a special token's role with the tokenizer's spelling), the categories shown in display order."""
    m = (
        mass[mass.category.isin(labels)]
        .assign(category=lambda d: d.category.map(labels))
        .melt(
            id_vars=["layer", "head", "category"], value_vars=["raw", "effective"], var_name="kind", value_name="mass"
        )
        .round(4)
    )
    order = list(labels.values())
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


def separator_chart(seps: pd.DataFrame) -> alt.LayerChart:
    """Attention mass on the separator between two segments and on the final one, per layer, raw (solid) and
    effective (dashed); from :func:`identifiability.effective.projection.separator_mass`."""
    long = seps.melt(id_vars=["layer", "separator"], value_vars=["raw", "effective"], var_name="attention")
    base = alt.Chart(long, title="Attention mass on the two separators of a sentence pair").encode(
        x=alt.X("layer:O", title="layer"),
        y=alt.Y("value:Q", title="mean attention mass on the separator"),
        color=alt.Color("separator:N", title="separator", sort=["first", "second"]),
        tooltip=["layer", "separator", "attention", alt.Tooltip("value:Q", format=".3f")],
    )
    dash = alt.StrokeDash("attention:N", title="attention", sort=["raw", "effective"], legend=dash_legend())
    return alt.layer(base.mark_line().encode(strokeDash=dash), base.mark_point(filled=True)).properties(
        width=420, height=220
    )


VIEWER_DIGITS = 2  # hundredths: finer than the colour steps a heat map shows apart; half the gzip bytes of thousandths


def head_viewer(
    examples: Sequence[tuple[list[str], torch.Tensor, torch.Tensor]],
    labels: Sequence[str] | None = None,
    digits: int = VIEWER_DIGITS,
    size: int = 176,  # three panels a row, with the query labels (cut at 64 px), fit the 688 px output column
) -> alt.HConcatChart:
    """Raw, effective and null attention side by side, with a sentence dropdown, a layer slider and a head
    dropdown; works in a static page (Altair params, no Python callbacks).

    Args:
        examples: per sentence ``(tokens, raw (L, H, d_s, d_s), effective (L, H, d_s, d_s))``.
        labels: dropdown labels of the sentences (default: their first words).
        digits: decimals kept; values are shipped as integers in units of 10^-digits.

    Page weight: one record per (sentence, layer, head) holds the whole matrix of raw attention and of its
    null part (raw - effective, small numbers around 0 that compress better than the effective attention),
    each as one string of comma-separated integers (a string is one token in the page's JSON, and in the
    notebook file, where a list would take a line per number). The browser splits and flattens them,
    recovers query and key from the position, and computes the effective attention as raw - null part.
    Chapter 3's default viewer (3 sentences of 39-40 tokens, 72 heads) is 1.50 MB of JSON, 0.30 MB
    gzip-compressed; in thousandths, with the effective attention shipped, it was 1.83 MB and 0.62 MB.
    """
    scale = 10**digits
    recs = []
    tokens = []

    def ints(m: torch.Tensor) -> torch.Tensor:
        return (m.double() * scale).round().to(torch.int64)

    def encode(ints: torch.Tensor) -> list[list[str]]:
        L, H, n, _ = ints.shape
        return [[",".join(map(str, ints[layer, h].flatten().tolist())) for h in range(H)] for layer in range(L)]

    for s, (toks, raw, eff) in enumerate(examples):
        L, H, n, _ = raw.shape
        r, z = encode(ints(raw)), encode(ints(raw) - ints(eff))
        tokens.append([f"{i} {t}" for i, t in enumerate(toks)])
        for layer in range(L):
            for h in range(H):
                recs.append({"s": s, "layer": layer + 1, "head": h, "n": n, "r": r[layer][h], "z": z[layer][h]})
    L, H = examples[0][1].shape[:2]
    labels = (
        list(labels)
        if labels is not None
        else [
            f"{i}: {' '.join(t for t in toks[1:6])} … ({len(toks)} tokens)" for i, (toks, _, _) in enumerate(examples)
        ]
    )
    menu = alt.binding_select(options=list(range(len(examples))), labels=labels, name="sentence ")
    sentence = alt.param(name="sentence", value=0, **({"bind": menu} if len(examples) > 1 else {}))  # no 1-option menu
    layer = alt.param(name="layer", value=L, bind=alt.binding_range(min=1, max=L, step=1, name="layer "))
    head = alt.param(name="head", value=0, bind=alt.binding_select(options=list(range(H)), name="head "))
    tok_json = json.dumps(tokens)

    def axis(title: str) -> alt.Axis:
        return alt.Axis(
            title=title,
            labelExpr=sentence_label_expr(tokens, size, label_px=11),
            labelOverlap=False,
            labelFontSize=9,
            labelLimit=64,  # a long token is cut with "…"; the tooltip shows it whole
        )

    base = (
        alt.Chart(pd.DataFrame(recs))
        .transform_filter((alt.datum.s == sentence) & (alt.datum.layer == layer) & (alt.datum.head == head))
        .transform_calculate(rv="split(datum.r, ',')", zv="split(datum.z, ',')")
        .transform_flatten(["rv", "zv"])
        .transform_window(i="row_number()", groupby=["s", "layer", "head"])
        .transform_calculate(
            q="floor((datum.i - 1) / datum.n)",
            k="(datum.i - 1) % datum.n",
            raw=f"toNumber(datum.rv) / {scale}",
            effective=f"(toNumber(datum.rv) - toNumber(datum.zv)) / {scale}",
            null=f"toNumber(datum.zv) / {scale}",
        )
        .transform_calculate(query=f"{tok_json}[sentence][datum.q]", key=f"{tok_json}[sentence][datum.k]")
        .mark_rect()
        .properties(width=size, height=size)
    )

    fmt = f".{digits}f"

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
                alt.Tooltip("raw:Q", format=fmt),
                alt.Tooltip("effective:Q", format=fmt),
                alt.Tooltip("null:Q", format=fmt),
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
        .properties(usermeta=KEEP_WIDTH)  # its token labels are thinned for the panels' size
    )
