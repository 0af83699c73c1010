"""Charts of the effective-attention chapter (03): Figure 1 panels and the head viewer, and the sentences
the chapter states its measurements in (generated from the study results of
:mod:`identifiability.studies.effective`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import altair as alt
import pandas as pd
import torch

from ..effective import OTHER, PUNCTUATION, SEPARATOR, STRUCTURAL
from .render import sentence_label_expr

if TYPE_CHECKING:
    from ..studies.effective import (
        MassByCategory,
        OutProjectionRanks,
        PairSeparators,
        PrecisionCheck,
        RawVsEffective,
        ViewerExamples,
    )


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


def mass_chart(mass: pd.DataFrame, labels: dict[str, str]) -> alt.FacetChart:
    """Attention mass by key category, raw next to effective: points are heads, ticks their mean per layer.
    ``mass``: rows of :func:`identifiability.effective.attention_mass`; ``labels``: category -> its label
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


# --------------------------------------------------------------------------------------------------
# The chapter's sentences, generated from its results
# --------------------------------------------------------------------------------------------------


def out_projection_text(r: OutProjectionRanks) -> str:
    """What the rank of W_O^h means for the decomposition; for a causal model, what A_eff does to the triangle."""
    n = r.wo_rank.numel()
    text = f"$W_O^h$ has rank {r.wo_rank_min} to {int(r.wo_rank.max())} (d_v = {r.d_v}): " + (
        f"full rank for all {n} heads, so $\\mathrm{{col}}(T) = \\mathrm{{col}}(V_h)$ and the value matrices "
        "are decomposed as they are."
        if not r.wo_deficient_heads
        else f"{r.wo_deficient_heads} of {n} heads are rank deficient; their $V_h$ is projected onto the row "
        "space of $W_O^h$ before it is decomposed."
    )
    if r.causal:
        text += (
            f"\n\n*{r.family} is a causal model: its raw attention is lower-triangular. Effective attention is a "
            "projection of each row onto col(T), which in general does not keep the triangle: A_eff may put "
            "(positive or negative) weight on future positions even though the head never reads them. The "
            "definition and the invariant A_eff T = A T are unchanged.*"
        )
    return text


def raw_vs_effective_text(r: RawVsEffective) -> str:
    """Figure 1 (a) in words: A_eff = A below d_v, the null-space dimension, the decorrelation beyond d_v."""
    if r.pearson_min_below_dv is None:
        below = f"No input is shorter than $d_v = {r.d_v}$"
    elif r.identical_below_dv:
        below = (
            f"Up to $d_s < d_v = {r.d_v}$ every head of every input has $A_\\text{{eff}} = A$ "
            f"(smallest correlation {r.pearson_min_below_dv:.4f})"
        )
    else:
        below = (
            f"Below $d_v = {r.d_v}$ some head has $A_\\text{{eff}} \\ne A$ "
            f"(smallest correlation {r.pearson_min_below_dv:.4f})"
        )
    text = (
        f"**Measured.** {below}; {r.null_heads_at_or_below_dv} of {r.heads_at_or_below_dv} head-inputs with "
        "$d_s \\le d_v$ have a non-empty null space (possible only through a numerically rank-deficient $V_h$, "
        "see the precision check below). The null-space dimension equals $\\max(d_s - d_v, 0)$ for "
        f"{100 * r.null_dim_equals_ds_minus_dv:.2f}% of all head-inputs."
    )
    if r.ds_just_above_dv is not None:
        first = (
            f"it is first below 0.9 at $d_s$ = {r.first_ds_median_below_0_9}"
            if r.first_ds_median_below_0_9 is not None
            else "it stays at or above 0.9 at every length measured"
        )
        layers = ", ".join(f"{v:.2f}" for v in r.pearson_median_by_layer_longest)
        text += (
            f" Just above $d_v$ ($d_s$ = {r.ds_just_above_dv}) the median correlation is "
            f"{r.pearson_median_just_above_dv:.2f}; {first}, and at $d_s$ = {r.fig1_longest} it is "
            f"{r.pearson_median_longest:.2f} (layers 1–{len(r.pearson_median_by_layer_longest)}: {layers})."
        )
    return text


def null_share_text(r: RawVsEffective) -> str:
    share = r.null_share_median_longest
    return (
        f"At $d_s$ = {r.fig1_longest}, the median head has {100 * share:.0f}% of its attention matrix's norm in "
        f"the null part: {'more' if share > 0.5 else 'less'} than half of what a raw attention map shows does not "
        "reach the head's output."
    )


def precision_text(r: PrecisionCheck) -> str:
    ds = ", ".join(map(str, r.precision_rank_difference_ds))
    return (
        f"{r.precision_check_heads} head-inputs with $d_s \\le {r.max_ds}$ recomputed in {r.other}: the "
        f"null-space dimension differs for {r.precision_rank_differences}"
        + (
            f" (at $d_s$ = {ds}: a value matrix whose smallest singular value is below {r.precision}'s tolerance "
            f"but above {r.other}'s; such a direction is at the level of the float32 rounding with which the model "
            "itself computed $V_h$)"
            if r.precision_rank_differences
            else ""
        )
        + f"; the largest change of a correlation is {r.precision_max_pearson_difference:.1e}."
    )


def no_separator_text(r: MassByCategory) -> str:
    """One sentence where the tokenizer adds no separator (or no structural token at all) to a sentence."""
    if not any(c in r.mass_categories for c in STRUCTURAL):
        return (
            "This tokenizer adds neither a start nor a separator token to a sentence: there is no structural "
            "token to compare, and C5 is not testable on this model."
        )
    if SEPARATOR not in r.mass_categories:
        return (
            "This tokenizer adds no separator token to a sentence, so there is no separator mass to compare and "
            "C5 is not testable on this model."
        )
    return ""


def mass_text(r: MassByCategory, min_tokens: int) -> str:
    """Figure 1 (b, c) in words: each structural token's mass raw vs effective, overall and in its peak layer."""
    lines = []
    for c in (c for c in r.mass_categories if c in STRUCTURAL):
        raw, eff = r.mass_mean[c]["raw"], r.mass_mean[c]["effective"]
        per_layer = r.by_layer.xs(c, level="category")
        peak = per_layer.raw.idxmax()
        lines.append(
            f"- **{r.labels[c]}**: mean mass {raw:.3f} raw vs {eff:.3f} effective ({100 * (eff / raw - 1):+.0f}%); "
            f"in layer {peak}, where its raw mass peaks, {per_layer.raw[peak]:.3f} vs {per_layer.effective[peak]:.3f}."
        )
    for c in (c for c in r.mass_categories if c in (PUNCTUATION, OTHER)):
        lines.append(f"- **{c}**: {r.mass_mean[c]['raw']:.3f} raw vs {r.mass_mean[c]['effective']:.3f} effective.")
    missing = no_separator_text(r)
    return (
        f"**Measured on {r.mass_sentences} sentences of {min_tokens}+ tokens.**\n\n"
        + "\n".join(lines)
        + (f"\n\n{missing}" if missing else "")
    )


def separators_text(r: PairSeparators | None, corpus: str) -> str:
    """The mass on the two separators of a sentence pair in words, or why there are none to measure."""
    if r is None:
        return (
            f'The corpus `{corpus}` holds single sentences; rerun with `corpus="lee_pairs"` for the two-segment '
            "inputs of the paper's setting."
        )
    if not r.pairs:
        return "No pair holds two separator tokens: this tokenizer does not mark where the second segment begins."
    m = r.means
    return (
        f"On {r.pairs} sentence pairs: the separator between the segments receives {m.loc['first', 'raw']:.3f} of "
        f"the attention raw and {m.loc['first', 'effective']:.3f} effective; the final one "
        f"{m.loc['second', 'raw']:.3f} raw and {m.loc['second', 'effective']:.3f} effective (means over layers)."
    )


def page_text(page: dict[str, int], r: ViewerExamples, n_layers: int, n_heads: int) -> str:
    """The page weight of the largest charts (bytes of their specs), and how many cells the viewer ships."""
    cells = sum(n * n for n in r.viewer_lengths) * n_layers * n_heads
    return (
        f"Page weight of this chapter's largest charts: Figure 1 (a) {page['figure_1a'] / 1e3:.0f} kB, head viewer "
        f"{page['head_viewer'] / 1e6:.2f} MB ({cells:,} attention cells, shipped as integers in thousandths; the "
        "null part is computed in the browser)."
    )
