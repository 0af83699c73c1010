"""Charts and generated text of the non-identifiability chapter (02): null-space dimensions per head,
alternative attention next to the real one, distances per head and per length, the realisability spectra,
and the sentences that state each section's findings from its study result
(:mod:`identifiability.studies.nonidentifiability`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd
import torch
from pandas.io.formats.style import Styler

from ..verdicts.nonidentifiability import C2_MARGIN, C3_REALISABLE_TV
from ..verdicts.text import unanchored
from .render import KEEP_WIDTH, token_axis, token_tooltip

if TYPE_CHECKING:
    from ..studies.nonidentifiability import (
        Alternatives,
        ExactTests,
        ExactThreshold,
        HeadDistances,
        NullSpaceSurvey,
        RealisableSearch,
        Threshold,
    )

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


# ------------------------------------------------------------------------------------ generated text


def causal_note(family: str) -> str:
    """What changes for a causal (decoder) model."""
    return (
        f"*{family} is causal: row $i$ of $A$ is zero beyond key $i$, so $A$ is not strictly positive. "
        "Everything below is done per row on the keys that row can see: row $i$'s alternatives live in the "
        "left null space of $[T_{0..i}, 1]$, and the exact realisability test, which needs $\\log A$, does not "
        "apply (realisability with a mask is a low-rank completion problem); realisable alternatives are "
        "still constructed and verified through explicit $Q', K'$ with the causal mask. The one-head cells "
        "ignore the mask: their numbers illustrate the method for a bidirectional head only.*"
    )


def survey_text(r: NullSpaceSurvey) -> str:
    """How many heads meet the rank-nullity bound with equality, and the gap around the rank tolerance."""
    return (
        f"**{r.survey_texts} texts** ($d_s$ = {r.survey_min_ds}–{r.survey_max_ds}) × {r.heads_per_text} heads = "
        f"{r.survey_heads} matrices $T$. rank$(T) = \\min(d_s, d_v)$ in **{100 * r.share_rank_T_full:.2f}%** of "
        f"them; $\\dim\\mathrm{{LN}}(T) = \\max(0, d_s - d_v)$ in {100 * r.share_LN_T_at_bound:.2f}% and "
        f"$\\dim\\mathrm{{LN}}([T,1]) = \\max(0, d_s - d_v - 1)$ in **{100 * r.share_LN_T1_at_bound:.2f}%**; "
        f"violations of the rank–nullity bound: {r.rank_nullity_violations} (there can be none).\n\n"
        f"Gap around the rank tolerance ($\\max(m, n)\\,\\varepsilon$ of float64 relative to the largest singular "
        f"value, at most {r.rtol:.0e}): the smallest singular value counted was {r.gap_T_kept_min:.1e} (of $T$) "
        f"and {r.gap_T1_kept_min:.1e} (of $[T, 1]$) relative to the largest"
        + (
            f"; the largest one not counted (the $d_s - d_v$ structural zeros of $T$, from a direct SVD) was "
            f"{r.gap_T_dropped_max:.1e}: float64 rounding. Any tolerance between those gives the same ranks."
            if np.isfinite(r.gap_T_dropped_max)
            else "; no text was longer than $d_v$, so nothing fell below the tolerance."
        )
    )


CHECK_LABELS = {
    "row_sum_max_error": ("largest row-sum error", "{:.1e}"),
    "min_entry": ("smallest entry", "{:.1e}"),
    "rel_output_error": ("relative output change", "{:.1e}"),
    "tv_mean": ("mean TV per row", "{:.4f}"),
    "tv_max": ("largest TV of a row", "{:.4f}"),
}


def checks_table(r: Alternatives) -> Styler:
    """Both constructed alternatives, checked: one row each."""
    checks = pd.DataFrame({"paper's construction": r.construct, "largest TV (LP)": r.lp}).T
    return checks.style.format({k: f for k, (_, f) in CHECK_LABELS.items()}).relabel_index(
        [CHECK_LABELS[c][0] for c in checks.columns], axis="columns"
    )


def excerpt(text: str, n: int = 300) -> str:
    return text[:n] + ("…" if len(text) > n else "")


def alternatives_text(r: Alternatives) -> str:
    """Whether both alternatives are valid, and how far each moves the rows."""
    c, lp = r.construct, r.lp
    ok = r.construct_verified and r.lp_verified
    gain = lp["tv_mean"] / max(c["tv_mean"], 1e-300)
    further = "much further" if gain > 10 else "further" if gain > 1 else "no further"
    return (
        f"$d_s = {r.example_ds}$, layer {r.example_layer}, head {r.example_head}: $\\dim\\mathrm{{LN}}([T,1]) = "
        f"{r.example_dim_LN_T1}$. Both alternatives are row-stochastic (largest row-sum error "
        f"{max(c['row_sum_max_error'], lp['row_sum_max_error']):.1e}), non-negative (smallest entry "
        f"{min(c['min_entry'], lp['min_entry']):.1e}) and reproduce the head output to a relative "
        f"{max(c['rel_output_error'], lp['rel_output_error']):.1e} "
        f"({'within' if ok else '**not** within'} the required $10^{{-10}}$). The paper's random "
        f"direction moves each row by a total variation of {c['tv_mean']:.4f} on average: a random "
        f"direction soon hits a near-zero weight, which stops the step. Chosen directions (the LP's) move rows "
        f"{further}: {lp['tv_mean']:.3f} on average and up to {lp['tv_max']:.3f}."
    )


def viewer_alternatives(r: Alternatives) -> dict[str, torch.Tensor]:
    """The alternatives :func:`alternative_viewer` offers, by name."""
    return {
        "paper's construction": r.paper,
        "largest TV (LP)": r.largest_tv,
        "max-entropy (realisable, §4)": r.max_entropy,
    }


def head_distances_text(r: HeadDistances) -> str:
    """The per-layer table and how far alternatives of every head move."""
    t = r.table
    return (
        r.per_layer_table.round(3).to_markdown()
        + "\n\n"
        + (
            f"Across all {len(t)} heads every alternative reproduced its head's output to a relative "
            f"{max(r.survey_lp_error_max, r.survey_me_error_max):.1e}. The mean total variation per row reachable "
            f"with row-stochastic alternatives is {r.survey_lp_tv_mean:.3f} (largest single row "
            f"{t.lp_tv_max.max():.3f}); realisable ones reach {r.survey_me_tv_mean:.3f}."
        )
    )


def exact_threshold_text(r: ExactThreshold) -> str:
    """The exact d_s = 3, d_v = 2 cases in LaTeX: the generic T's unique solution, the deficient T's family."""
    import sympy as sp

    ex = r.examples
    g, dfc = ex["generic"], ex["deficient"]
    return (
        f"$A = {sp.latex(ex['A'])}$\n\n"
        f"**Generic $T$** $= {sp.latex(g['T'])}$, rank {g['rank_T']}: $\\mathrm{{LN}}(T)$ is spanned by "
        f"$x = {sp.latex(sp.Matrix(g['LN_T'][0]).T)}$ with $x\\cdot\\mathbf 1 = {g['x_dot_1'][0]} \\neq 0$, so "
        f"$\\dim\\mathrm{{LN}}([T,\\mathbf 1]) = {g['dim_LN_T1']}$. The solution set of $A'T = AT,\\ A'\\mathbf 1 = "
        f"\\mathbf 1$ is $A' = {sp.latex(g['solution'])}$ with {g['free_parameters']} free parameters: "
        f"**{'only A itself' if g['unique'] else 'not unique'}**.\n\n"
        f"**Rank-deficient $T$** $= {sp.latex(dfc['T'])}$, rank {dfc['rank_T']} $< d_v = 2$: "
        f"$\\dim\\mathrm{{LN}}([T,\\mathbf 1]) = {dfc['dim_LN_T1']}$ and the solution set "
        f"$A' = {sp.latex(dfc['solution'])}$ has {dfc['free_parameters']} free parameters (one per row): "
        f"alternatives exist already at $d_s = d_v + 1$."
    )


NONE_TV = 1e-8  # a largest row move below this is no move (as the search's "none at the threshold")
MORE_EXTREME = 1e-3  # a smallest weight below this fraction of A's needs "far more extreme" logits


def threshold_text(r: Threshold, survey: NullSpaceSurvey) -> str:
    """Uniqueness at d_s = d_v + 1 on every head, its margins, and where the threshold lies for this model."""
    zero = max(r.threshold_lp_tv_max, r.threshold_me_tv_max) < NONE_TV
    return (
        f"$d_s = {r.threshold_ds} = d_v + 1$, {r.threshold_inputs} inputs: in **{r.threshold_unique_heads} of "
        f"{r.threshold_heads} (input, head) pairs** rank$([T,1]) = d_s$ with its smallest relative singular value "
        f"above {C2_MARGIN:.0e}, so $A$ is the only row-stochastic matrix with that output. The closest to "
        f"degenerate: smallest relative singular value of $[T, 1]$ {r.threshold_sigma_min:.1e} (rank tolerance "
        f"{survey.rtol:.0e}); $|x\\cdot\\mathbf 1|/(\\lVert x\\rVert\\sqrt{{d_s}})$ for $x$ spanning LN(T) at least "
        f"{r.threshold_ones_min:.1e}. For layer {r.layer}, head {r.head}, the LP's largest move is "
        f"{r.threshold_lp_tv_max:.1e} and the max-entropy alternative's {r.threshold_me_tv_max:.1e} "
        f"in total variation: {'zero up to rounding' if zero else '**not** zero'}.\n\n"
        f"**When rank$(T) < d_v$** (a rank-deficient $W_O^h$, or repeated rows of $T$) the threshold moves down: "
        f"alternatives exist as soon as $d_s > \\mathrm{{rank}}([T, \\mathbf 1])$, as the rank-deficient exact "
        f"example shows at $d_s = 3$. In the survey above rank$(T) = \\min(d_s, d_v)$ held for "
        f"{100 * survey.share_rank_T_full:.2f}% of heads. Where this model's threshold lies, for every head, is "
        "claim C17, judged at the end of the chapter from these counts."
    )


NO_SPECTRA = "*(No spectra: the exact test does not apply to a causal model.)*"


def _paper_ranks(r: ExactTests) -> dict[str, int | None]:
    """The centred-log ranks of the paper's alternatives (every candidate but the real A and max-entropy)."""
    return {k: v for k, v in r.realisable_rank.items() if k not in ("A (real)", "max-entropy alternative")}


def exact_tests_text(r: ExactTests, heads: HeadDistances) -> str:
    """The real A's rank against the paper's alternatives' ("" for a causal model: the test does not apply)."""
    if r.causal:
        return ""
    real = r.tests["A (real)"]
    return (
        f"**Measured.** The real $A$'s centred log has rank {real.rank} "
        f"({'at most' if real.realisable else 'more than'} $d_q = {r.d_q}$); the paper's alternatives "
        "(at the full step, where some weight is driven to zero — we stop a relative $10^{-12}$ short of it — and at "
        "interior steps) have ranks "
        + ", ".join(f"{v} ({k})" for k, v in _paper_ranks(r).items())
        + f" against at most $d_s - 1 = {r.d_s - 1}$; over all heads of this text "
        f"{heads.survey_paper_realisable_share:.0%} of the paper's alternatives pass the test. Verdict C3 "
        "at the end of the chapter applies the claim's rule to these counts."
    )


SEARCH_COLUMNS = {
    "d_s": "d_s",
    "layer": "layer",
    "head": "head",
    "dim_LN_T1": "dim LN([T,1])",
    "expected_dim": "d_q(d_s−d_q−1)",
    "naive_dim": "d_q(d_s−d_q)",
    "local_dim": "measured dim",
    "lp_tv_mean": "TV row-stoch. (LP)",
    "me_tv_mean": "TV max-entropy",
    "search_tv_mean": "TV search (mean)",
    "search_tv_max": "TV search (max row)",
    "search_error": "output error",
    "search_rank": "rank log A'",
    "min_prob_A": "min weight A",
    "min_prob_search": "min weight A'",
}


def search_table(r: RealisableSearch) -> Styler:
    """The search by length, one row per (d_s, layer, head)."""
    show = r.table[list(SEARCH_COLUMNS)].rename(columns=SEARCH_COLUMNS)
    exp = {c: "{:.0e}" for c in ["output error", "min weight A", "min weight A'"]}
    counts = {c: "{:.0f}" for c in ["dim LN([T,1])", "d_q(d_s−d_q−1)", "d_q(d_s−d_q)", "measured dim", "rank log A'"]}
    tv = {c: "{:.4f}" for c in show.columns if c.startswith("TV")}
    return show.style.format(tv | exp | counts, na_rep="–").hide(axis="index")


def _span(values: pd.Series) -> str:
    """'4' or '3–4': the range of integer values over heads."""
    lo, hi = int(values.min()), int(values.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"


def search_text(r: RealisableSearch) -> str:
    """Objection 1, measured: where realisable alternatives were found, how far they move, the dimension
    count; claim C16 (judged at the end of the chapter) says what these numbers decide."""
    by_len = r.by_length
    beyond = by_len[by_len.d_s >= r.d_v + 2]
    far = by_len.iloc[-1]
    near = beyond.iloc[0] if r.beyond_runs else None
    found, missing = ([n for n, ok in sorted(r.realisable_by_ds.items()) if ok is want] for want in (True, False))
    measured = r.table.dropna(subset=["local_dim"])
    return (
        "**Realisable alternatives (objection 1), measured.** "
        + (
            f"At $d_s \\ge d_v + 2$ ({r.beyond_runs} runs, $d_s$ = {beyond.d_s.min()}–{beyond.d_s.max()}) the "
            f"search found a softmax-realisable $A'$ with the same output, moving rows by a mean total variation "
            f"above {C3_REALISABLE_TV:g} (C3's), at $d_s$ = "
            f"{', '.join(map(str, found)) or 'no length'}"
            + (f", not at {', '.join(map(str, missing))}" if missing else "")
            + f" (relative output error at most {r.search_error_max:.1e}"
            + ("" if r.causal else f"; rank of its centred log at most {r.search_rank_max} $\\le d_q = {r.d_q}$")
            + "). "
            if r.beyond_runs
            else "No length $d_s \\ge d_v + 2$ was searched. "
        )
        + (
            "At $d_s \\le d_v + 1$ the realisable alternatives move rows by less than $10^{-8}$, as Section 3's "
            "count says. "
            if r.realisable_none_at_threshold and (r.table.d_s <= r.d_v + 1).any()
            else ""
        )
        + (
            f"Near the threshold they barely differ (mean TV {near.search_tv_mean:.1e} at $d_s = {int(near.d_s)}$); "
            f"at $d_s = {int(far.d_s)}$ rows move by {far.search_tv_mean:.3f} on average and up to "
            f"{far.search_tv_max:.3f}, against {far.lp_tv_mean:.3f} for the unconstrained row-stochastic "
            "alternatives. "
            if near is not None
            else ""
        )
        + (
            "The measured solution dimension, against the count $d_q(d_s - d_q - 1)$: "
            + "; ".join(
                f"{_span(g.local_dim)} against {_span(g.expected_dim)} at $d_s = {n}$"
                for n, g in measured.groupby("d_s")
            )
            + ". "
            if len(measured)
            else ""
        )
        + "Claim C16, judged at the end of the chapter, applies its rule to these numbers."
        + (
            ""
            if not r.beyond_runs
            else f"\n\n*Caveat.* These alternatives are realisable in the sense of the objection (some $Q', K'$ of "
            f"width $d_q$ produce them), but they use far more extreme logits than the real head: their smallest "
            f"weight is {r.search_min_prob:.0e} where $A$'s is {r.A_min_prob:.0e}. Whether this head's own $W_Q, W_K$ "
            f"could produce them on some input, or alternatives within $A$'s logit range exist, is not settled here."
            if r.search_min_prob < MORE_EXTREME * r.A_min_prob
            else f"\n\nTheir smallest weight is {r.search_min_prob:.0e} where $A$'s is {r.A_min_prob:.0e}: their "
            "logits stay within about the real head's range."
        )
    )


def summary_text(
    survey: NullSpaceSurvey,
    alt: Alternatives,
    heads: HeadDistances,
    exact: ExactThreshold,
    thr: Threshold,
    tests: ExactTests,
    search: RealisableSearch,
    claims: list[str],
    model_name: str,
) -> str:
    """The chapter's summary: the claim and both objections as measured, then each claim's verdict sentence
    (``claims``): whether a claim holds is said by its verdict only."""
    deficient = [v for v in _paper_ranks(tests).values() if v is not None]
    found, missing = ([n for n, ok in sorted(search.realisable_by_ds.items()) if ok is want] for want in (True, False))
    lines = [
        f"**The claim** — beyond $d_v$ tokens attention is not identifiable from a head's output. *Measured:* in "
        f"{100 * survey.share_LN_T1_at_bound:.1f}% of {survey.survey_heads} measured heads "
        f"$\\dim\\mathrm{{LN}}([T,\\mathbf 1]) = d_s - d_v - 1$ exactly (float64, relative rank tolerance at most "
        f"{survey.rtol:.0e}, singular values kept down to {min(survey.gap_T_kept_min, survey.gap_T1_kept_min):.0e}, "
        f"rounding noise at {survey.gap_T_dropped_max:.0e}); alternatives built in it reproduce the output to "
        f"{max(alt.construct['rel_output_error'], alt.lp['rel_output_error']):.0e} and, at $d_s = {alt.example_ds}$, "
        f"move rows by a total variation of {heads.survey_lp_tv_mean:.2f} on average over all heads. C1 and C15 "
        "below judge it.",
        "**Objection 2 (threshold).** At $d_s = d_v + 1$ the exact example ($d_s = 3$, $d_v = 2$) admits "
        + ("only $A$ itself" if exact.exact_generic_unique else "alternatives (see Section 3)")
        + f", and {thr.threshold_unique_heads} of {thr.threshold_heads} real (input, head) pairs are unique; "
        f"rank$(T) = \\min(d_s, d_v)$ in {100 * survey.share_rank_T_full:.1f}% of the surveyed heads. C2 and C17 "
        "below judge where the threshold lies.",
        "**Objection 1 (softmax realisability).** "
        + (
            "The exact test does not apply to this causal model. "
            if tests.causal
            else f"The paper's alternatives tested on the chosen head fail the exact test (a centred log of rank "
            f"{max(deficient, default=0)} $> d_q = {tests.d_q}$). "
            if not any(tests.realisable[k] for k in _paper_ranks(tests))
            else "Some of the paper's alternatives tested on the chosen head pass the exact test (see Section 4). "
        )
        + (
            f"Realisable alternatives with identical output (mean row TV above {C3_REALISABLE_TV:g}) were found at "
            f"$d_s$ = {', '.join(map(str, found)) or 'no length'}"
            + (f", not at {', '.join(map(str, missing))}" if missing else "")
            + f" (a closed-form max-entropy one, and the optimiser's, up to a mean total variation of "
            f"{search.search_max_tv_mean:.3g} per row, largest row {search.search_max_tv_row:.3g})"
            + (
                "; at $d_s \\le d_v + 1$ they move rows by less than $10^{-8}$. "
                if search.realisable_none_at_threshold and (search.table.d_s <= search.d_v + 1).any()
                else ". "
            )
        )
        + (
            ""
            if search.search_min_prob is None
            else f"They need far more extreme logits than the real head (smallest weight "
            f"{search.search_min_prob:.0e} vs {search.A_min_prob:.0e}), so whether *this* head's weights could "
            "produce them stays open."
            if search.search_min_prob < MORE_EXTREME * search.A_min_prob  # far more extreme logits
            else f"Their logits stay within about the real head's range (smallest weight {search.search_min_prob:.0e} "
            f"vs {search.A_min_prob:.0e})."
        )
        + " C3 and C16 below judge the objection.",
    ]
    lines.append(f"*Model {model_name}, {survey.survey_texts} texts; all numbers computed by this page.*")
    # the page shows the verdicts again, anchored, under "Verdicts"
    return "\n\n".join(lines + [unanchored(c) for c in claims])
