"""Chapter 2's text (non-identifiability): the sentences that state each section's findings, and its
tables, from study results of :mod:`identifiability.studies.nonidentifiability`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from ..verdicts.nonidentifiability import C2_MARGIN, C3_REALISABLE_TV
from ..verdicts.text import unanchored

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
