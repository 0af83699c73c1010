"""Charts of chapter 10 (which measure to trust): one sentence's contributions under every measure at a
chosen layer, the scores of every measure against each reference per layer, and what each measure costs. The
tables come from :mod:`identifiability.studies.measures`; the words are in :mod:`identifiability.text.measures`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..evidence.measures import NO_OWN
from ..studies.measures import REFERENCE_LABELS, label_of, scores_from_rows
from ..verdicts.measures import margin, state
from .render import combined_choice

NOT_RECORDED = "not recorded"  # a run recorded before the stronger null: no state under the rules in force
STATE_MARK = {"tracks": "✓", "does not track": "✗", "undecided": "?", NOT_RECORDED: "–"}


Sentence = tuple[str, Sequence[str], Mapping[str, np.ndarray]]  # text, tokens, {label: (L+1, d_s, d_s)}


MATRIX_SENTENCES = 5  # the sentences the matrices chart offers (the book computes at most 5 live)


def matrices_chart(sentences: Sequence[Sentence], columns: int = 3) -> alt.FacetChart:
    """Small heatmaps, one per measure (and reference), of c[l, i, j] for the sentence a menu chooses at the
    layer a slider chooses: rows hidden tokens i, columns input tokens j. ``sentences``: (text, tokens, {label:
    (L+1, d_s, d_s)}) per sentence, of which the first ``MATRIX_SENTENCES`` are offered (a recorded run of 50
    sentences would make a page of tens of megabytes). Each row of the chart's data carries one matrix c[l]
    (flattened in the browser), which keeps the page small and the rows few."""
    sentences = list(sentences)[:MATRIX_SENTENCES]
    labels = list(sentences[0][2])
    n_layers = next(iter(sentences[0][2].values())).shape[0] - 1
    rows = [
        {"s": s, "m": label, "l": layer, "w": [round(float(x), 3) for x in arrays[label][layer].ravel()]}
        for s, (_, tokens, arrays) in enumerate(sentences)
        for label in labels
        for layer in range(1, n_layers + 1)
    ]
    toks = json.dumps([list(t) for _, t, _ in sentences])
    names = [text if len(text) <= 70 else text[:69] + "…" for text, _, _ in sentences]
    pick = alt.binding_select(options=list(range(len(sentences))), labels=names, name="sentence ")
    sent = alt.param(name="sentence", value=0, bind=pick)
    layer = alt.param(name="layer", value=n_layers, bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer "))
    longest = max(len(t) for _, t, _ in sentences)
    side = max(110, min(150, 8 * longest))  # three columns fit the page's 680 px
    token = f"{toks}[sentence][datum.value]"
    heat = (
        alt.Chart(pd.DataFrame(rows))
        .transform_filter((alt.datum.l == layer) & (alt.datum.s == sent))
        .transform_flatten(["w"])
        .transform_window(k1="row_number()", groupby=["s", "m", "l"])
        .transform_calculate(n=f"{toks}[datum.s].length")
        .transform_calculate(i="floor((datum.k1 - 1) / datum.n)", j="(datum.k1 - 1) % datum.n")
        .transform_calculate(input=f"{toks}[datum.s][datum.j]", hidden=f"{toks}[datum.s][datum.i]")
        .mark_rect()
        .encode(
            x=alt.X("j:O", title="input token j", axis=alt.Axis(labelExpr=token, labelAngle=-60, labelFontSize=9)),
            y=alt.Y("i:O", title="hidden token i", axis=alt.Axis(labelExpr=token, labelFontSize=9)),
            color=alt.Color("w:Q", title="share c", scale=alt.Scale(scheme="oranges", domain=[0, 1])),
            tooltip=[
                alt.Tooltip("m:N", title="measure"),
                alt.Tooltip("hidden:N", title="hidden token"),
                alt.Tooltip("input:N", title="input token"),
                alt.Tooltip("w:Q", title="c", format=".3f"),
            ],
        )
        .properties(width=side, height=side)
    )
    return (
        heat.facet(facet=alt.Facet("m:N", title=None, sort=labels), columns=columns)
        .add_params(sent, layer)
        .properties(title="Every measure on one sentence: the share of each input token in each hidden token")
    )


def _table(rows: Sequence[dict]) -> pd.DataFrame:
    """One row per score: label, reference, layer, variant, the statistic's estimate and interval, the nulls'
    estimates, the paired difference from the stronger null with the margin it is compared with, top-1
    agreement and the state under the rule (:func:`identifiability.verdicts.measures.state`; "not recorded"
    for a run recorded before the stronger null)."""
    out = []
    for s in scores_from_rows(rows):
        d = s.minus_stronger
        out.append({
            "label": label_of(s.measure), "reference": REFERENCE_LABELS.get(s.reference, s.reference),
            "layer": s.layer, "variant": "own token left out" if s.variant == NO_OWN else "all tokens",
            "estimate": s.statistic.estimate, "low": s.statistic.low, "high": s.statistic.high,
            "shuffled": s.shuffled.estimate, "distance": s.distance.estimate,
            "over_null": None if d is None else d.estimate, "margin": margin(s), "top1": s.top1,
            "state": NOT_RECORDED if d is None else state(s),
        })  # fmt: skip
    return pd.DataFrame(out)


def scores_chart(rows: Sequence[dict], n_sentences: int) -> alt.LayerChart:
    """Every measure (rows) at every layer (columns): the colour is its score against the chosen reference
    (mean over sentences of the median per-row Spearman correlation), the mark its state under the rules
    (✓ tracks, ✗ does not track, ? undecided). Menus choose the reference and whether each row's own token is
    left out. ``rows``: :func:`identifiability.studies.measures.score_rows`."""
    table = _table(rows).assign(sign=lambda t: t.state.map(STATE_MARK)).round(3)
    refs, variants = list(dict.fromkeys(table.reference)), list(dict.fromkeys(table.variant))
    shown = ["estimate", "low", "high", "shuffled", "distance", "over_null", "margin", "top1", "state", "sign"]
    data, params, chosen = combined_choice(
        table, ["reference", "variant"], [refs, variants], shown, lambda r, v: f"{r}, {v}", (refs[0], variants[0]),
        "against",
    )  # fmt: skip
    order = list(dict.fromkeys(data.label))
    base = (
        alt.Chart(data)
        .transform_filter(chosen)
        .encode(
            x=alt.X("layer:O", title="layer l"),
            y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=150)),
            tooltip=[
                alt.Tooltip("label:N", title="measure"),
                alt.Tooltip("layer:O"),
                alt.Tooltip("estimate:Q", title="score", format=".3f"),
                alt.Tooltip("low:Q", title="95% low", format=".3f"),
                alt.Tooltip("high:Q", title="95% high", format=".3f"),
                alt.Tooltip("shuffled:Q", title="rows shuffled", format=".3f"),
                alt.Tooltip("distance:Q", title="distance only", format=".3f"),
                alt.Tooltip("over_null:Q", title="over the stronger null", format=".3f"),
                alt.Tooltip("margin:Q", title="margin", format=".3f"),
                alt.Tooltip("top1:Q", title="top-1 agreement", format=".2f"),
                alt.Tooltip("state:N", title="under the rule"),
            ],
        )
    )
    heat = base.mark_rect().encode(
        color=alt.Color(
            "estimate:Q",
            title="score ρ",
            scale=alt.Scale(scheme="blueorange", domain=[-1, 1]),
            legend=alt.Legend(orient="bottom", gradientLength=160),
        )
    )
    text = base.mark_text(fontSize=13).encode(text="sign:N")
    return (
        alt.layer(heat, text)
        .add_params(*params)
        .properties(
            width=170,
            height=22 * len(order),
            title=alt.TitleParams(
                "Each measure against the reference",
                subtitle=[
                    f"per layer, on {n_sentences} sentence{'s' if n_sentences != 1 else ''}",
                    "✓ tracks (over the stronger null",
                    "by more than the margin),",
                    "✗ does not track, ? undecided",
                ],
            ),
        )
    )


def cost_chart(seconds: pd.DataFrame) -> alt.Chart:
    """Seconds per sentence of each measure (mean over the sentences measured in this run), one dot each on a
    log scale (a bar would start at 0, which a log scale has not). ``seconds``: rows with ``label`` and
    ``seconds``."""
    return (
        alt.Chart(seconds.round(5))
        .mark_circle(size=90, opacity=1)
        .encode(
            x=alt.X("seconds:Q", scale=alt.Scale(type="log"), title="seconds per sentence (log scale)"),
            y=alt.Y("label:N", title=None, sort="-x", axis=alt.Axis(labelLimit=150)),
            tooltip=[alt.Tooltip("label:N", title="measure"), alt.Tooltip("seconds:Q", format=".3g")],
        )
        .properties(width=170, height=20 * len(seconds), title="Seconds per sentence, this machine")
    )
