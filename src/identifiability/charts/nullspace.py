"""Charts of the non-identifiability chapter (02): null-space dimensions per head, alternative attention
next to the real one, distances per head and per length, and the realisability spectra."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import torch

from .render import token_axis

DIMENSIONS = {"rank_T": "rank(T)", "dim_LN_T": "dim LN(T)", "dim_LN_T1": "dim LN([T,1])"}


def dimensions_chart(
    dims: pd.DataFrame, d_v: int, n_layers: int, n_heads: int, layer: int, head: int
) -> alt.LayerChart:
    """rank(T), dim LN(T), dim LN([T,1]) against d_s for one head at a time (layer slider 1..L, head dropdown),
    with the rank-nullity bounds as lines. ``dims``: rows of :func:`identifiability.nullspace.null_space_table`."""
    compact = dims[["d_s", "layer", "head", *DIMENSIONS]].drop_duplicates()  # folded in the browser
    label = " : ".join(f"datum.key == '{k}' ? '{v}'" for k, v in DIMENSIONS.items()) + " : ''"
    grid = np.unique(np.concatenate([[1, d_v, d_v + 1], dims.d_s.unique(), [dims.d_s.max()]]))
    bounds = pd.concat(
        [
            pd.DataFrame({"d_s": grid, "dimension": np.maximum(0, grid - d_v), "bound": "d_s - d_v"}),
            pd.DataFrame({"d_s": grid, "dimension": np.maximum(0, grid - d_v - 1), "bound": "d_s - d_v - 1"}),
            pd.DataFrame({"d_s": grid, "dimension": np.minimum(grid, d_v), "bound": "min(d_s, d_v)"}),
        ]
    )
    layer_p = alt.param(name="layer", value=layer, bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer "))
    head_p = alt.param(name="head", value=head, bind=alt.binding_select(options=list(range(n_heads)), name="head "))
    xs = alt.X("d_s:Q", scale=alt.Scale(type="log", base=2), title="sequence length d_s (tokens)")
    lines = (
        alt.Chart(bounds)
        .mark_line(strokeDash=[4, 3], opacity=0.6)
        .encode(
            x=xs,
            y="dimension:Q",
            color=alt.Color("bound:N", scale=alt.Scale(range=["#999", "#c44", "#48c"]), title="bound"),
        )
    )
    pts = (
        alt.Chart(compact)
        .transform_filter((alt.datum.layer == layer_p) & (alt.datum.head == head_p))
        .transform_fold(list(DIMENSIONS), as_=["key", "dimension"])
        .transform_calculate(quantity=label)
        .mark_point(filled=True, size=45)
        .encode(
            x=xs,
            y=alt.Y("dimension:Q", title="dimension"),
            color=alt.Color("quantity:N", title="measured"),
            tooltip=["d_s:Q", "quantity:N", "dimension:Q"],
        )
        .add_params(layer_p, head_p)
    )
    return (
        alt.layer(lines, pts)
        .resolve_scale(color="independent")
        .properties(width=460, height=320, title="Null-space dimensions per head (relative rank tolerance, float64)")
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
    size = max(200, min(260, 5 * n))  # two panels a row fit the page's text column
    big = float(max((m - a).abs().max() for m in alternatives.values()))

    def heat(title, cond, color):
        return (
            alt.Chart(rows, title=title)
            .transform_filter(cond)
            .transform_flatten(["w"])
            .transform_window(k1="row_number()", groupby=["which", "q"])
            .transform_calculate(k="datum.k1 - 1")
            .mark_rect()
            .encode(
                x=alt.X("k:O", axis=token_axis(tokens, "key")),
                y=alt.Y("q:O", axis=token_axis(tokens, "query")),
                color=color,
                tooltip=["q:O", "k:O", "w:Q"],
            )
            .properties(width=size, height=size)
        )

    weight = alt.Color("w:Q", scale=alt.Scale(scheme="blues", domain=[0, 1], type="sqrt"), title="weight")
    diff = alt.Color("w:Q", scale=alt.Scale(scheme="redblue", domain=[-big, big], reverse=True), title="A' − A")
    left = heat("A (real)", alt.datum.which == "A", weight)
    right = heat("A' (alternative)", alt.datum.which == pick, weight).add_params(pick)
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
    return alt.concat(left, right, delta, bars, columns=2).resolve_scale(color="independent")


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
        id_vars=["d_s", "layer", "head"],
        value_vars=["lp_tv_mean", "me_tv_mean", "search_tv_mean"],
        var_name="kind",
        value_name="tv",
    )
    tv_long["kind"] = tv_long.kind.map(
        {
            "lp_tv_mean": "row-stochastic, LP (paper's set)",
            "me_tv_mean": "realisable: max-entropy",
            "search_tv_mean": "realisable: search",
        }
    )
    tv_long["tv"] = tv_long.tv.clip(lower=1e-16)
    tv_long["series"] = tv_long.kind + (" · layer " + tv_long.layer.astype(str) if per_layer else "")
    thr_rule = alt.Chart(pd.DataFrame({"x": [d_v + 1]})).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x="x:Q")
    return (
        alt.Chart(tv_long, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("d_s:Q", scale=alt.Scale(type="log", base=2), title="d_s (red: d_v + 1)"),
            y=alt.Y("tv:Q", scale=alt.Scale(type="log"), title="mean TV(a_i, a'_i) over rows"),
            color=alt.Color("kind:N", title=""),
            detail="series:N",
            tooltip=["d_s", "layer", "kind", alt.Tooltip("tv:Q", format=".2e")],
        )
        .properties(width=460, height=300)
        + thr_rule
    )
