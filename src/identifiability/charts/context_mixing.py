"""Charts of the context-mixing chapter (06): Hidden Token Attribution, one function per figure.

The numbers come from :mod:`identifiability.hta` and the chapter's studies
(:mod:`identifiability.studies.context_mixing`); these functions only build the Altair specs (the sentences
the page states are in :mod:`identifiability.text.context_mixing`). Layers are numbered 1..L (hidden states
after each layer; layer 0, x itself, is never drawn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from ..evidence.context_mixing import C10Evidence
from ..hta import HTAResult, estimate_pairs, explorer_rows
from ..verdicts import Verdict
from ..verdicts.context_mixing import C10_HIGH, C10_LOW, C10_WIDE
from .render import dash_legend, sentence_label_expr, thinned_axis


def estimator_scatter(
    exact: Sequence[HTAResult], estimated: Sequence[HTAResult], probes: int, seed: int = 0, sample: int = 2500
) -> alt.LayerChart:
    """Estimated against exact c on log axes, one point per entry of layers ≥ 1 (a random sample of
    ``sample`` entries drawn with ``seed``), coloured by layer, with the diagonal."""
    pts = estimate_pairs(exact, estimated, sample=sample, seed=seed)
    diag = pd.DataFrame({"exact": [pts.exact.min(), 1], "estimate": [pts.exact.min(), 1]})
    scatter = (
        alt.Chart(pts)
        .mark_circle(size=12, opacity=0.5)
        .encode(
            x=alt.X("exact:Q", scale=alt.Scale(type="log"), title="exact c"),
            y=alt.Y("estimate:Q", scale=alt.Scale(type="log"), title=f"estimated c ({probes} probes per token)"),
            color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis")),
            tooltip=["layer", alt.Tooltip("exact:Q", format=".4f"), alt.Tooltip("estimate:Q", format=".4f")],
        )
    )
    line = alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 3]).encode(x="exact:Q", y="estimate:Q")
    return (scatter + line).properties(width=380, height=380, title="Estimator vs exact HTA (sample of entries)")


def _by_corpus(summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The per-layer summaries ({corpus: :func:`identifiability.hta.layer_summary` frame}) in one frame."""
    return pd.concat([v.assign(corpus=k) for k, v in summaries.items()]).round(4)


def own_share_boxes(summaries: Mapping[str, pd.DataFrame]) -> alt.FacetChart:
    """Paper Fig 3a: per layer, box plots of the own-token share (quartiles, 5–95% whiskers, median tick)
    and the median share of the top contributor, one panel per corpus."""
    base = alt.Chart(_by_corpus(summaries)).encode(x=alt.X("layer:O", title="layer"))
    box = alt.layer(
        base.mark_rule(color="steelblue").encode(y=alt.Y("own_p05:Q", title="contribution c"), y2="own_p95:Q"),
        base.mark_bar(size=18, color="lightsteelblue").encode(y="own_q1:Q", y2="own_q3:Q"),
        base.mark_tick(color="navy", size=18, thickness=2).encode(
            y="own_median:Q", tooltip=["layer", "own_median", "own_q1", "own_q3", "tokens"]
        ),
        base.mark_line(color="darkorange", point=True).encode(
            y="top_median:Q", tooltip=["layer", alt.Tooltip("top_median:Q", title="median top contribution")]
        ),
    ).properties(width=260, height=260)
    return box.facet(column=alt.Column("corpus:N", title=None)).properties(
        title=alt.TitleParams(
            "Own-token contribution per layer",
            subtitle=["box: quartiles, whiskers: 5–95%, tick: median;", "orange: median of the top contributor"],
        )
    )


def top_is_self_lines(summaries: Mapping[str, pd.DataFrame]) -> alt.Chart:
    """Paper Fig 3b: per layer and corpus, the percentage of hidden tokens whose top contributor is their
    own input token."""
    return (
        alt.Chart(_by_corpus(summaries))
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("top_is_self_pct:Q", title="% of hidden tokens", scale=alt.Scale(domain=[0, 100])),
            color=alt.Color("corpus:N"),
            tooltip=["corpus", "layer", alt.Tooltip("top_is_self_pct:Q", format=".1f")],
        )
        .properties(width=420, height=260, title="Hidden tokens whose largest contributor is their own input token")
    )


def distance_figure(prof: pd.DataFrame, max_offset: int) -> alt.HConcatChart:
    """Paper Fig 4 from a :func:`identifiability.hta.distance_profile` frame: (a) a heat map of the context
    share by relative position k per layer, (b) the total contribution by k in the first, middle and
    last layer. The two outer columns pool every offset beyond ``max_offset``."""
    prof = prof.copy()
    prof["label"] = prof.offset.map(  # the two ends pool every farther offset
        lambda o: f"≤{o}" if o < -max_offset else f"≥{o}" if o > max_offset else str(o)
    )
    order = [prof.label[prof.offset == o].iloc[0] for o in sorted(prof.offset.unique())]
    k_axis = lambda title, px: thinned_axis(order, title, px, order.index("0"), (order[0], order[-1]))
    heat = (
        alt.Chart(prof[prof.offset != 0])
        .mark_rect()
        .encode(
            x=alt.X("label:O", sort=order, axis=k_axis("relative position k of the input token", 240)),
            y=alt.Y("layer:O"),
            color=alt.Color(
                "context_share:Q",
                title="share of context",
                scale=alt.Scale(scheme="oranges"),
                legend=alt.Legend(orient="bottom", gradientLength=160),
            ),
            tooltip=[
                "layer",
                "label",
                alt.Tooltip("context_share:Q", format=".3f"),
                alt.Tooltip("mean_c:Q", format=".4f"),
            ],
        )
    )
    L = int(prof.layer.max())
    picked = sorted({1, (L + 1) // 2, L})
    lines = (
        alt.Chart(prof[prof.layer.isin(picked)])
        .mark_line(point=True)
        .encode(
            x=alt.X("label:O", sort=order, axis=k_axis("relative position k", 220)),
            y=alt.Y("share:Q", title="share of all contribution", scale=alt.Scale(type="sqrt")),
            color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis"), legend=alt.Legend(orient="bottom")),
            tooltip=["layer", "label", alt.Tooltip("share:Q", format=".4f")],
        )
    )
    return alt.hconcat(
        heat.properties(width=240, height=220, title=["(a) context share by neighbour,", "per layer"]),
        lines.properties(
            width=220, height=220, title=["(b) total contribution by neighbour,", "first/middle/last layer"]
        ),
    ).resolve_scale(color="independent")


def far_share_lines(means: Mapping[str, pd.DataFrame], far: int) -> alt.LayerChart:
    """C11's long-range quantity per layer and corpus, from :func:`identifiability.hta.window_summary` frames:
    the far share f of the context (input tokens beyond ``far``, the own token set aside), solid, and what
    uniform mixing over the context gives, n_far / (d_s - 1), dashed."""
    rows = [
        {"corpus": k, "layer": int(r.layer), "f": float(r[col]), "mixing": what}
        for k, t in means.items()
        for _, r in t.iterrows()
        for col, what in (("far_share", "measured"), ("far_share_uniform", "uniform over the context"))
    ]
    data = pd.DataFrame(rows, columns=["corpus", "layer", "f", "mixing"])
    base = alt.Chart(data).encode(
        x=alt.X("layer:O", title="layer l"),
        y=alt.Y("f:Q", title=f"far share f (beyond {far})", axis=alt.Axis(format="%")),
        color=alt.Color("corpus:N"),
        tooltip=["corpus:N", "layer:O", "mixing:N", alt.Tooltip("f:Q", format=".3f")],
    )
    # the points are a layer of their own: on a line drawn with points the dash legend draws the same filled
    # circle for "measured" and "uniform"
    dash = alt.StrokeDash(
        "mixing:N", title=None, sort=["measured", "uniform over the context"], legend=dash_legend(orient="bottom")
    )
    return alt.layer(base.mark_line().encode(strokeDash=dash), base.mark_point(filled=True)).properties(
        width=420, height=240, title="Far share of the context, per layer (C11)"
    )


def special_context(prof: pd.DataFrame, src: pd.DataFrame) -> alt.VConcatChart:
    """Paper Figs 18, 25 from :func:`identifiability.hta.special_profile`'s two frames, each with a column
    ``token`` naming the target (e.g. [CLS], [SEP]): the mean contribution by distance into the sentence,
    and the split of the target's context into itself, the other special tokens and the words."""
    a = (
        alt.Chart(prof.round(5))
        .mark_line(point=True)
        .encode(
            x=alt.X("offset:O", title="distance into the sentence (0 = the token itself)"),
            y=alt.Y("c:Q", title="mean contribution", scale=alt.Scale(type="sqrt")),
            color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis"), legend=alt.Legend(orient="right")),
            tooltip=["token", "layer", "offset", alt.Tooltip("c:Q", format=".3f")],
        )
        .properties(width=230, height=200)
    )
    b = (
        alt.Chart(src.round(5))
        .mark_bar()
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("share:Q", stack="normalize", title="share of its context"),
            color=alt.Color(
                "source:N",
                title="part of its context",
                scale=alt.Scale(scheme="set2"),
                legend=alt.Legend(orient="right"),
            ),
            tooltip=["token", "layer", "source", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=230, height=200)
    )
    # the layer lines and the source bars have different colour scales, each with its own legend
    return (
        alt.vconcat(
            a.facet(column=alt.Column("token:N", title=None)), b.facet(column=alt.Column("token:N", title=None))
        )
        .resolve_scale(color="independent")
        .resolve_legend(color="independent")
        .properties(title="Context of the first and last special token")
    )


def pos_lines(pos: pd.DataFrame, corpus: str) -> alt.Chart:
    """Paper Figs 26–37 from a :func:`identifiability.hta.pos_summary` frame of one corpus: the median
    own-token share per layer and POS tag; clicking a tag in the legend highlights it."""
    sel = alt.selection_point(fields=["tag"], bind="legend")
    return (
        alt.Chart(pos)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("median:Q", title="median own-token contribution"),
            color=alt.Color("tag:N", scale=alt.Scale(scheme="tableau20")),
            opacity=alt.condition(sel, alt.value(1), alt.value(0.12)),
            tooltip=["tag", "layer", alt.Tooltip("median:Q", format=".3f"), "count"],
        )
        .add_params(sel)
        .properties(width=460, height=300, title=f"Own-token contribution by part of speech ({corpus})")
    )


def contribution_explorer(
    results: Sequence[HTAResult], labels: Sequence[str] | None = None, digits: int = 3
) -> alt.LayerChart:
    """An interactive heatmap, drawn in the static page: pick a sentence and a hidden token; rows are
    layers, columns input tokens, colour is c[l, i, j]. One row per (sentence, layer, hidden token) carries
    that row of c as an array (:func:`identifiability.hta.explorer_rows`, flattened in the browser), which
    keeps the page small. Its token labels are thinned for the width drawn, which a phone narrows."""
    df = explorer_rows(results, digits)
    L = results[0].S.shape[0] - 1
    labels = list(labels) if labels is not None else [f"{s}: {r.text[:60]}" for s, r in enumerate(results)]
    token_lists = json.dumps([list(r.tokens) for r in results])
    max_n = max(r.n_tokens for r in results)
    sent = alt.param(
        name="sentence",
        value=0,
        bind=alt.binding_select(options=list(range(len(results))), labels=labels, name="sentence "),
    )
    tok = alt.param(
        name="token",
        value=1 if max_n > 1 else 0,
        bind=alt.binding_range(min=0, max=max_n - 1, step=1, name="hidden token position "),
    )
    base = (
        alt.Chart(df)
        .transform_filter((alt.datum.s == sent) & (alt.datum.i == tok))
        .transform_flatten(["w"])
        .transform_window(j1="row_number()", groupby=["s", "l", "i"])
        .transform_calculate(
            j="datum.j1 - 1", input=f"{token_lists}[datum.s][datum.j1 - 1]", hidden=f"{token_lists}[datum.s][datum.i]"
        )
    )
    width = max(300, min(540, 22 * max_n))
    heat = base.mark_rect().encode(
        x=alt.X(
            "j:O",
            title="input token j",
            axis=alt.Axis(
                labelExpr=sentence_label_expr([list(r.tokens) for r in results], "width", label_px=14),  # at -60°
                labelAngle=-60,
                labelOverlap=False,
            ),
        ),
        y=alt.Y("l:O", title="layer"),
        color=alt.Color("w:Q", title="contribution c", scale=alt.Scale(scheme="oranges", domain=[0, 1])),
        tooltip=[
            alt.Tooltip("hidden:N", title="hidden token"),
            alt.Tooltip("input:N", title="input token"),
            alt.Tooltip("l:O", title="layer"),
            alt.Tooltip("w:Q", title="c", format=".3f"),
        ],
    )
    own = (
        base.transform_filter(alt.datum.j == alt.datum.i)
        .mark_rect(fill=None, stroke="black", strokeWidth=1.5)
        .encode(x="j:O", y="l:O")
    )
    return (
        (heat + own)
        .add_params(sent, tok)
        .properties(
            width=width,
            height=28 * L,
            title=alt.TitleParams(
                "Contribution of every input token (columns) to the chosen hidden token, per layer",
                subtitle="black box: its own input token",
            ),
        )
    )


def band_chart(e: C10Evidence, v: Verdict) -> alt.LayerChart:
    """C10: the own-token-on-top share at the last layer (with its interval) over every hidden token, word
    tokens, special tokens and the original rule's sample, against the rule's band and the two bands of the
    robustness alternatives (``v``: the C10 verdict, whose labels the band tooltips show)."""
    alts = dict(v.robustness)
    bands = pd.DataFrame(
        [
            ("wide", C10_LOW - C10_WIDE, C10_HIGH + C10_WIDE, alts.get("band wide", "")),
            ("rule", C10_LOW, C10_HIGH, v.label),
            ("narrow", C10_LOW + C10_WIDE, C10_HIGH - C10_WIDE, alts.get("band narrow", "")),
        ],
        columns=["band", "low", "high", "verdict"],
    ).round(4)
    rows = [("every hidden token", e.share), ("word tokens", e.words), ("special tokens", e.special)]
    rows.append(("original sample", e.original))
    # an estimate without an interval (one sentence) is drawn as a point: no NaN reaches the spec
    pts = pd.DataFrame(
        [(k, x.estimate, *((x.low, x.high) if x.has_interval else (x.estimate,) * 2)) for k, x in rows if x],
        columns=["tokens", "share", "low", "high"],
    ).round(4)
    order = list(pts.tokens)
    rect = (
        alt.Chart(bands)
        .mark_rect(opacity=0.22, color="seagreen")
        .encode(
            x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title="share whose top contributor is the own token"),
            x2="high:Q",
            tooltip=["band", "low", "high", alt.Tooltip("verdict:N", title="C10 on every hidden token")],
        )
    )
    bars = alt.Chart(pts).encode(y=alt.Y("tokens:N", sort=order, title=None))
    return alt.layer(
        rect,
        bars.mark_rule(strokeWidth=2).encode(x="low:Q", x2="high:Q"),
        bars.mark_point(filled=True, size=60, color="black").encode(
            x="share:Q", tooltip=["tokens", "share", "low", "high"]
        ),
    ).properties(
        width=420,
        height=30 * len(pts) + 20,
        title=alt.TitleParams(
            "Own token on top at the last layer (exact HTA)",
            subtitle=f"green: the bands {', '.join(f'[{a:g}, {b:g}]' for _, a, b, _ in bands.itertuples(index=False))} "
            "(the rule's in the middle); lines: 95% intervals",
        ),
    )
