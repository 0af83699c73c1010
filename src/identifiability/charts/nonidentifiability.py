"""Charts of the non-identifiability chapter (02): null-space dimensions per head, alternative attention next
to the real one, distances per head and per length, the realisability spectra. The sentences that state each
section's findings are in :mod:`identifiability.text.nonidentifiability`, except the two verdict sentences
below (:func:`null_space_verdict_text`, :func:`search_text`), which are to become claim rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd
import torch

from .render import KEEP_WIDTH, token_axis, token_tooltip

if TYPE_CHECKING:
    from ..studies.nonidentifiability import Alternatives

DIMENSIONS = {"rank_T": "rank(T)", "dim_LN_T": "dim LN(T)", "dim_LN_T1": "dim LN([T,1])"}
ZERO_TV = 1e-12  # a mean TV distance below this is 0 up to float64 rounding of the LP and the search
SEARCH_KINDS = {  # the search's alternatives, each a column of mean TV distances
    "lp_tv_mean": "row-stochastic, LP (paper's set)",
    "me_tv_mean": "realisable: max-entropy",
    "search_tv_mean": "realisable: search",
}


def dimensions_chart(dims: pd.DataFrame, d_v: int) -> alt.LayerChart:
    """rank(T), dim LN(T) and dim LN([T,1]) against d_s over every (text, head) measured: a point at the
    median, a bar from the smallest to the largest value, and the rank-nullity bound of each quantity as a
    dashed line in its colour. No head controls: generically every head has the same dimensions (the
    tooltip says in how many of the heads the bound holds exactly). ``dims``: rows of
    :func:`identifiability.nullspace.null_space_table`. The y axis is a square-root scale, so the region
    around the threshold d_v stays visible next to long texts."""
    long = dims.melt(id_vars=["d_s"], value_vars=list(DIMENSIONS), var_name="key", value_name="dimension")
    long["bound"] = np.select(
        [long.key == "rank_T", long.key == "dim_LN_T"],
        [np.minimum(long.d_s, d_v), np.maximum(0, long.d_s - d_v)],
        np.maximum(0, long.d_s - d_v - 1),
    )
    long["at_bound"] = long.dimension == long.bound
    agg = (
        long.groupby(["d_s", "key"])
        .agg(
            low=("dimension", "min"),
            median=("dimension", "median"),
            high=("dimension", "max"),
            n=("dimension", "size"),
            at_bound=("at_bound", "sum"),
        )
        .reset_index()
    )
    agg["quantity"] = agg.key.map(DIMENSIONS)
    agg["bound holds"] = agg.at_bound.astype(int).astype(str) + " of " + agg.n.astype(str)
    grid = np.unique(np.concatenate([[1, d_v, d_v + 1], dims.d_s.unique(), [dims.d_s.max()]]))
    bounds = pd.concat(
        [
            pd.DataFrame({"d_s": grid, "dimension": np.minimum(grid, d_v), "quantity": DIMENSIONS["rank_T"]}),
            pd.DataFrame({"d_s": grid, "dimension": np.maximum(0, grid - d_v), "quantity": DIMENSIONS["dim_LN_T"]}),
            pd.DataFrame(
                {"d_s": grid, "dimension": np.maximum(0, grid - d_v - 1), "quantity": DIMENSIONS["dim_LN_T1"]}
            ),
        ]
    )
    bounds["bound"] = bounds.quantity.map(
        {v: b for v, b in zip(DIMENSIONS.values(), ("min(d_s, d_v)", "d_s − d_v", "d_s − d_v − 1"), strict=True)}
    )
    xs = alt.X("d_s:Q", scale=alt.Scale(type="log", base=2), title="sequence length d_s (tokens)")
    color = alt.Color(
        "quantity:N",
        title="measured (points) and its bound (dashed)",
        sort=list(DIMENSIONS.values()),
        legend=alt.Legend(orient="bottom", labelLimit=200, titleLimit=400),
    )
    y = alt.Y("dimension:Q", title="dimension", scale=alt.Scale(type="sqrt"))
    lines = (
        alt.Chart(bounds)
        .mark_line(strokeDash=[4, 3], opacity=0.7)
        .encode(x=xs, y=y, color=color, tooltip=["quantity:N", "bound:N", "d_s:Q", "dimension:Q"])
    )
    bars = (
        alt.Chart(agg)
        .mark_rule()
        .encode(x=xs, y=alt.Y("low:Q", scale=alt.Scale(type="sqrt")), y2="high:Q", color=color)
    )
    pts = (
        alt.Chart(agg)
        .mark_point(filled=True, size=40)
        .encode(
            x=xs,
            y=alt.Y("median:Q", title="dimension", scale=alt.Scale(type="sqrt")),
            color=color,
            tooltip=[
                "quantity:N",
                "d_s:Q",
                alt.Tooltip("median:Q", title="median over heads"),
                alt.Tooltip("low:Q", title="smallest"),
                alt.Tooltip("high:Q", title="largest"),
                alt.Tooltip("bound holds:N", title="equal to the bound in"),
            ],
        )
    )
    return alt.layer(lines, bars, pts).properties(
        width=480, height=320, title="Null-space dimensions of every head (relative rank tolerance, float64)"
    )


def alternative_viewer(
    a: torch.Tensor, alternatives: dict[str, torch.Tensor], t: torch.Tensor, tokens: list[str]
) -> alt.ConcatChart:
    """The real attention A (d_s, d_s), one alternative A' (dropdown), A' - A, and the output change per token
    ||(A' - A) T||_i / ||A T||_i (log scale). One row per (matrix, query) holds the whole attention row,
    flattened in the browser, which keeps the page small."""
    n = a.shape[0]
    mats = {"A": a, **alternatives, **{f"diff:{k}": m - a for k, m in alternatives.items()}}
    rows = pd.DataFrame(
        [{"which": k, "q": i, "w": m[i].numpy().round(3).tolist()} for k, m in mats.items() for i in range(n)]
    )
    out_a = a @ t
    row_err = pd.concat(
        [
            pd.DataFrame(
                {
                    "q": np.arange(n),
                    "which": k,
                    "err": (((m - a) @ t).norm(dim=1) / out_a.norm(dim=1)).clamp_min(1e-18).numpy(),
                }
            )
            for k, m in alternatives.items()
        ]
    )
    row_err["err"] = row_err.err.map(lambda x: float(f"{x:.2e}"))
    names = list(alternatives)
    pick = alt.param(
        name="alternative",
        value=names[min(1, len(names) - 1)],
        bind=alt.binding_select(options=names, name="alternative "),
    )
    size = 220  # two panels a row, with their token labels and legends, fit the 688 px output column
    big = float(max((m - a).abs().max() for m in alternatives.values()))

    def heat(title, cond, color, y_labels=True):
        return (
            alt.Chart(rows, title=title)
            .transform_filter(cond)
            .transform_flatten(["w"])
            .transform_window(k1="row_number()", groupby=["which", "q"])
            .transform_calculate(k="datum.k1 - 1")
            .transform_calculate(query=token_tooltip(tokens, "q"), key=token_tooltip(tokens, "k"))
            .mark_rect()
            .encode(
                x=alt.X("k:O", axis=token_axis(tokens, "key", size)),
                # the right panel of a row has the same queries as the left one
                y=alt.Y(
                    "q:O", axis=token_axis(tokens, "query", size) if y_labels else alt.Axis(title=None, labels=False)
                ),
                color=color,
                tooltip=["query:N", "key:N", alt.Tooltip("w:Q", title="weight")],
            )
            .properties(width=size, height=size)
        )

    sqrt = alt.Scale(scheme="blues", domain=[0, 1], type="sqrt")
    weight = alt.Color("w:Q", scale=sqrt, title="weight", legend=alt.Legend(values=[0, 0.1, 0.5, 1]))
    diff = alt.Color("w:Q", scale=alt.Scale(scheme="redblue", domain=[-big, big], reverse=True), title="A' − A")
    left = heat("A (real)", alt.datum.which == "A", weight)
    right = heat("A' (alternative)", alt.datum.which == pick, weight, y_labels=False).add_params(pick)
    delta = heat("A' − A", alt.datum.which == "diff:" + pick, diff)
    bars = (
        alt.Chart(row_err, title="output change per token")
        .transform_filter(alt.datum.which == pick)
        .mark_circle(size=30)
        .encode(
            y=alt.Y("q:O", axis=None),
            x=alt.X("err:Q", scale=alt.Scale(type="log", domain=[1e-18, 1e-8]), title="||(A'-A)T||_i / ||AT||_i"),
            tooltip=["q", alt.Tooltip("err:Q", format=".1e")],
        )
        .properties(width=120, height=size)
    )
    together = alt.concat(left, right, delta, bars, columns=2, usermeta=KEEP_WIDTH)  # labels thinned for `size`
    return together.resolve_scale(color="independent")


def head_distance_chart(survey: pd.DataFrame, d_s: int) -> alt.Chart:
    """Mean total-variation distance per row reachable with unchanged output, per head, row-stochastic (LP) next
    to realisable (max-entropy). ``survey``: rows of :func:`identifiability.nullspace.head_survey`."""
    pts = survey.melt(
        id_vars=["layer", "head"], value_vars=["lp_tv_mean", "me_tv_mean"], var_name="kind", value_name="tv"
    )
    pts["kind"] = pts.kind.map({"lp_tv_mean": "row-stochastic (LP)", "me_tv_mean": "realisable (max-entropy)"})
    return (
        alt.Chart(pts, title=f"Mean total-variation distance per row reachable with unchanged output (d_s = {d_s})")
        .mark_point(filled=True, opacity=0.7)
        .encode(
            x=alt.X("layer:O"),
            xOffset="kind:N",
            y=alt.Y("tv:Q", title="mean TV(a_i, a'_i) over rows"),
            color=alt.Color("kind:N", title=""),
            tooltip=["layer", "head", "kind", alt.Tooltip("tv:Q", format=".3f")],
        )
        .properties(width=420, height=260)
    )


def spectra_chart(spectra: dict[str, torch.Tensor], d_q: int) -> alt.LayerChart:
    """Relative singular values of log A' - row means for each candidate A', with d_q marked."""
    spec = [
        pd.DataFrame({"index": np.arange(1, len(s) + 1), "sigma": s.clamp_min(1e-18).numpy(), "matrix": k})
        for k, s in spectra.items()
    ]
    rule = alt.Chart(pd.DataFrame({"x": [d_q + 0.5]})).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x="x:Q")
    chart = (
        alt.Chart(pd.concat(spec), title="Singular values of log A' − row means (relative), float64")
        .mark_line(point=True)
        .encode(
            x=alt.X("index:Q", title="index"),
            y=alt.Y("sigma:Q", scale=alt.Scale(type="log"), title="σ_k / σ_1"),
            color=alt.Color("matrix:N", title=""),
            tooltip=["matrix", "index", alt.Tooltip("sigma:Q", format=".1e")],
        )
    )
    return (chart + rule).properties(width=460, height=300)


def search_distance_chart(search: pd.DataFrame, d_v: int, title: str, per_layer: bool = False) -> alt.LayerChart:
    """Mean TV distance of output-preserving alternatives against d_s: row-stochastic (LP), realisable
    max-entropy and realisable search; d_v + 1 marked. ``search``: rows of
    :func:`identifiability.nullspace.search_by_length`; ``per_layer``: one line per layer."""
    tv_long = search.melt(
        id_vars=["d_s", "layer", "head"], value_vars=list(SEARCH_KINDS), var_name="kind", value_name="tv"
    )
    tv_long["kind"] = tv_long.kind.map(SEARCH_KINDS)
    tv_long["series"] = tv_long.kind + (" · layer " + tv_long.layer.astype(str) if per_layer else "")
    # a log axis has no 0: a distance of 0 is a marker at its bottom, each kind's a factor 2 above the last's
    positive, zeros = tv_long[tv_long.tv > ZERO_TV], tv_long[tv_long.tv <= ZERO_TV]
    floor = 10 ** np.floor(np.log10(positive.tv.min())) / 10 if len(positive) else 1e-6
    kinds = list(dict.fromkeys(tv_long.kind))
    zeros = zeros.assign(tv=floor * 2.0 ** zeros.kind.map(kinds.index), shown=f"0 (below {ZERO_TV:.0e})")
    enc = dict(
        x=alt.X("d_s:Q", scale=alt.Scale(type="log", base=2), title="d_s (red: d_v + 1)"),
        y=alt.Y("tv:Q", scale=alt.Scale(type="log"), title="mean TV(a_i, a'_i) over rows"),
        color=alt.Color("kind:N", title="", scale=alt.Scale(domain=kinds)),
    )
    lines = alt.Chart(positive).mark_line(point=True).encode(**enc, detail="series:N")
    lines = lines.encode(tooltip=["d_s", "layer", "kind", alt.Tooltip("tv:Q", format=".2e")])
    at_zero = alt.Chart(zeros).mark_point(shape="triangle-down", filled=True, size=70, opacity=1)
    at_zero = at_zero.encode(**enc, tooltip=["d_s", "layer", "kind", alt.Tooltip("shown:N", title="TV")])
    thr_rule = alt.Chart(pd.DataFrame({"x": [d_v + 1]})).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x="x:Q")
    note = alt.TitleParams(title, subtitle=f"▼ distance 0 (below {ZERO_TV:.0e}), which a log axis cannot show")
    return alt.layer(lines, at_zero, thr_rule).properties(width=460, height=300, title=note if len(zeros) else title)


def viewer_alternatives(r: Alternatives) -> dict[str, torch.Tensor]:
    """The alternatives :func:`alternative_viewer` offers, by name."""
    return {
        "paper's construction": r.paper,
        "largest TV (LP)": r.largest_tv,
        "max-entropy (realisable, §4)": r.max_entropy,
    }
